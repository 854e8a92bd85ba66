"""The roll-up kept by the database: triggers on ``messages``, ``conversations``, ``agent_runs``
and ``platform_settings`` (the organisation's time zone), and a backfill of the existing rows.

A row's share: an assistant message with ``tokens_used > 0`` counts for its conversation's user
on the date of its ``created_at``; a run with ``finished_at`` and ``tokens_used > 0`` for its owner
on the date of its ``finished_at`` — both dates in the organisation's time zone. Rows of zero
tokens (failed empty answers, skipped runs) count nowhere, so the scheduler's skipped rows cost
no roll-up write (the triggers' WHEN clauses).
"""

from django.db import migrations

FUNCTIONS = r"""
CREATE FUNCTION usage_org_timezone() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT timezone FROM platform_settings WHERE id = 1), 'UTC')
$$;

-- Add (events > 0) or take away (events < 0) one share of a key. Taking away what is not there
-- fails loudly: the roll-up and the raw rows disagree, and the write must not commit.
CREATE FUNCTION usage_apply(
    p_day date, p_user bigint, p_model text, p_source text, p_agent bigint,
    p_events bigint, p_tokens bigint, p_input bigint, p_output bigint
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    left_events bigint;
BEGIN
    IF p_events > 0 THEN
        INSERT INTO usage_daily AS u (day, user_id, model, source, agent_id, events, tokens, input_tokens, output_tokens)
        VALUES (p_day, p_user, p_model, p_source, p_agent, p_events, p_tokens, p_input, p_output)
        ON CONFLICT (day, user_id, model, source, agent_id) DO UPDATE SET
            events = u.events + EXCLUDED.events,
            tokens = u.tokens + EXCLUDED.tokens,
            input_tokens = u.input_tokens + EXCLUDED.input_tokens,
            output_tokens = u.output_tokens + EXCLUDED.output_tokens;
        RETURN;
    END IF;
    IF p_agent IS NULL THEN
        UPDATE usage_daily SET events = events + p_events, tokens = tokens + p_tokens,
            input_tokens = input_tokens + p_input, output_tokens = output_tokens + p_output
        WHERE day = p_day AND user_id = p_user AND model = p_model AND source = p_source AND agent_id IS NULL
        RETURNING events INTO left_events;
    ELSE
        UPDATE usage_daily SET events = events + p_events, tokens = tokens + p_tokens,
            input_tokens = input_tokens + p_input, output_tokens = output_tokens + p_output
        WHERE day = p_day AND user_id = p_user AND model = p_model AND source = p_source AND agent_id = p_agent
        RETURNING events INTO left_events;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'usage_daily has no row % % % % % to take a share from', p_day, p_user, p_model, p_source, p_agent
            USING ERRCODE = 'check_violation';
    END IF;
    IF left_events = 0 THEN
        DELETE FROM usage_daily
        WHERE day = p_day AND user_id = p_user AND model = p_model AND source = p_source
          AND agent_id IS NOT DISTINCT FROM p_agent AND events = 0;
    END IF;
END
$$;

CREATE FUNCTION usage_messages_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tz text := usage_org_timezone();
    owner bigint;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.role = 'assistant' AND OLD.tokens_used > 0 THEN
        SELECT user_id INTO owner FROM conversations WHERE id = OLD.conversation_id;
        -- No conversation: it is being deleted, and its BEFORE DELETE trigger took its share.
        IF FOUND THEN
            PERFORM usage_apply((OLD.created_at AT TIME ZONE tz)::date, owner, COALESCE(OLD.model, ''), 'chat', NULL,
                -1, -OLD.tokens_used, -COALESCE(OLD.input_tokens, 0), -COALESCE(OLD.output_tokens, 0));
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.role = 'assistant' AND NEW.tokens_used > 0 THEN
        SELECT user_id INTO owner FROM conversations WHERE id = NEW.conversation_id;
        PERFORM usage_apply((NEW.created_at AT TIME ZONE tz)::date, owner, COALESCE(NEW.model, ''), 'chat', NULL,
            1, NEW.tokens_used, COALESCE(NEW.input_tokens, 0), COALESCE(NEW.output_tokens, 0));
    END IF;
    RETURN NULL;
END
$$;

-- A conversation's whole share, added (sign 1) or taken away (-1) for ``p_user``.
CREATE FUNCTION usage_conversation_share(p_conversation uuid, p_user bigint, p_sign int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tz text := usage_org_timezone();
    share record;
BEGIN
    FOR share IN
        SELECT (created_at AT TIME ZONE tz)::date AS day, COALESCE(model, '') AS model, count(*) AS events,
               sum(tokens_used) AS tokens, sum(COALESCE(input_tokens, 0)) AS input_tokens,
               sum(COALESCE(output_tokens, 0)) AS output_tokens
        FROM messages
        WHERE conversation_id = p_conversation AND role = 'assistant' AND tokens_used > 0
        GROUP BY 1, 2
    LOOP
        PERFORM usage_apply(share.day, p_user, share.model, 'chat', NULL, p_sign * share.events,
            p_sign * share.tokens, p_sign * share.input_tokens, p_sign * share.output_tokens);
    END LOOP;
END
$$;

CREATE FUNCTION usage_conversations_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM usage_conversation_share(OLD.id, OLD.user_id, -1);
        RETURN OLD;
    END IF;
    PERFORM usage_conversation_share(NEW.id, OLD.user_id, -1);
    PERFORM usage_conversation_share(NEW.id, NEW.user_id, 1);
    RETURN NULL;
END
$$;

CREATE FUNCTION usage_runs_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tz text := usage_org_timezone();
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.finished_at IS NOT NULL AND OLD.tokens_used > 0 THEN
        PERFORM usage_apply((OLD.finished_at AT TIME ZONE tz)::date, OLD.owner_id, COALESCE(OLD.model, ''), 'agents',
            OLD.agent_id, -1, -OLD.tokens_used, -COALESCE(OLD.input_tokens, 0), -COALESCE(OLD.output_tokens, 0));
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.finished_at IS NOT NULL AND NEW.tokens_used > 0 THEN
        PERFORM usage_apply((NEW.finished_at AT TIME ZONE tz)::date, NEW.owner_id, COALESCE(NEW.model, ''), 'agents',
            NEW.agent_id, 1, NEW.tokens_used, COALESCE(NEW.input_tokens, 0), COALESCE(NEW.output_tokens, 0));
    END IF;
    RETURN NULL;
END
$$;

-- The whole roll-up from the raw rows: the backfill, a time zone change, a bulk load.
CREATE FUNCTION usage_rebuild() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    tz text := usage_org_timezone();
BEGIN
    DELETE FROM usage_daily;
    INSERT INTO usage_daily (day, user_id, model, source, agent_id, events, tokens, input_tokens, output_tokens)
    SELECT (m.created_at AT TIME ZONE tz)::date, c.user_id, COALESCE(m.model, ''), 'chat', NULL, count(*),
           sum(m.tokens_used), sum(COALESCE(m.input_tokens, 0)), sum(COALESCE(m.output_tokens, 0))
    FROM messages m JOIN conversations c ON c.id = m.conversation_id
    WHERE m.role = 'assistant' AND m.tokens_used > 0
    GROUP BY 1, 2, 3
    UNION ALL
    SELECT (r.finished_at AT TIME ZONE tz)::date, r.owner_id, COALESCE(r.model, ''), 'agents', r.agent_id, count(*),
           sum(r.tokens_used), sum(COALESCE(r.input_tokens, 0)), sum(COALESCE(r.output_tokens, 0))
    FROM agent_runs r
    WHERE r.finished_at IS NOT NULL AND r.tokens_used > 0
    GROUP BY 1, 2, 3, 5;
END
$$;

CREATE FUNCTION usage_timezone_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM usage_rebuild();
    RETURN NULL;
END
$$;
"""

TRIGGERS = r"""
CREATE TRIGGER usage_messages_insert AFTER INSERT ON messages
    FOR EACH ROW WHEN (NEW.tokens_used > 0) EXECUTE FUNCTION usage_messages_rollup();
CREATE TRIGGER usage_messages_update
    AFTER UPDATE OF conversation_id, role, model, tokens_used, input_tokens, output_tokens, created_at ON messages
    FOR EACH ROW WHEN ((OLD.tokens_used > 0 OR NEW.tokens_used > 0) AND
        (OLD.conversation_id, OLD.role, OLD.model, OLD.tokens_used, OLD.input_tokens, OLD.output_tokens, OLD.created_at)
        IS DISTINCT FROM
        (NEW.conversation_id, NEW.role, NEW.model, NEW.tokens_used, NEW.input_tokens, NEW.output_tokens, NEW.created_at))
    EXECUTE FUNCTION usage_messages_rollup();
CREATE TRIGGER usage_messages_delete AFTER DELETE ON messages
    FOR EACH ROW WHEN (OLD.tokens_used > 0) EXECUTE FUNCTION usage_messages_rollup();
CREATE TRIGGER usage_conversations_delete BEFORE DELETE ON conversations
    FOR EACH ROW EXECUTE FUNCTION usage_conversations_rollup();
CREATE TRIGGER usage_conversations_move AFTER UPDATE OF user_id ON conversations
    FOR EACH ROW WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id) EXECUTE FUNCTION usage_conversations_rollup();
CREATE TRIGGER usage_runs_insert AFTER INSERT ON agent_runs
    FOR EACH ROW WHEN (NEW.finished_at IS NOT NULL AND NEW.tokens_used > 0) EXECUTE FUNCTION usage_runs_rollup();
CREATE TRIGGER usage_runs_update
    AFTER UPDATE OF owner_id, agent_id, model, tokens_used, input_tokens, output_tokens, finished_at ON agent_runs
    FOR EACH ROW WHEN ((OLD.finished_at IS NOT NULL OR NEW.finished_at IS NOT NULL) AND
        (OLD.owner_id, OLD.agent_id, OLD.model, OLD.tokens_used, OLD.input_tokens, OLD.output_tokens, OLD.finished_at)
        IS DISTINCT FROM
        (NEW.owner_id, NEW.agent_id, NEW.model, NEW.tokens_used, NEW.input_tokens, NEW.output_tokens, NEW.finished_at))
    EXECUTE FUNCTION usage_runs_rollup();
CREATE TRIGGER usage_runs_delete AFTER DELETE ON agent_runs
    FOR EACH ROW WHEN (OLD.finished_at IS NOT NULL AND OLD.tokens_used > 0) EXECUTE FUNCTION usage_runs_rollup();
CREATE TRIGGER usage_org_timezone_changed AFTER UPDATE OF timezone ON platform_settings
    FOR EACH ROW WHEN (OLD.timezone IS DISTINCT FROM NEW.timezone) EXECUTE FUNCTION usage_timezone_rollup();
SELECT usage_rebuild();
"""

DROP = r"""
DROP TRIGGER IF EXISTS usage_org_timezone_changed ON platform_settings;
DROP TRIGGER IF EXISTS usage_runs_delete ON agent_runs;
DROP TRIGGER IF EXISTS usage_runs_update ON agent_runs;
DROP TRIGGER IF EXISTS usage_runs_insert ON agent_runs;
DROP TRIGGER IF EXISTS usage_conversations_move ON conversations;
DROP TRIGGER IF EXISTS usage_conversations_delete ON conversations;
DROP TRIGGER IF EXISTS usage_messages_delete ON messages;
DROP TRIGGER IF EXISTS usage_messages_update ON messages;
DROP TRIGGER IF EXISTS usage_messages_insert ON messages;
DROP FUNCTION IF EXISTS usage_timezone_rollup();
DROP FUNCTION IF EXISTS usage_rebuild();
DROP FUNCTION IF EXISTS usage_runs_rollup();
DROP FUNCTION IF EXISTS usage_conversations_rollup();
DROP FUNCTION IF EXISTS usage_conversation_share(uuid, bigint, int);
DROP FUNCTION IF EXISTS usage_messages_rollup();
DROP FUNCTION IF EXISTS usage_apply(date, bigint, text, text, bigint, bigint, bigint, bigint, bigint);
DROP FUNCTION IF EXISTS usage_org_timezone();
DELETE FROM usage_daily;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0001_initial"),
        ("achilles", "0010_model_prices"),
        ("agents", "0010_spend_split"),
        ("conversations", "0005_spend_split"),
    ]

    operations = [migrations.RunSQL(FUNCTIONS + TRIGGERS, DROP)]
