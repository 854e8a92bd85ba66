"""A run's owner is checked once per statement instead of looked up once per row.

Migration 0006 copied ``agent_runs.owner_id`` from the agent in a BEFORE trigger on every inserted
row: a PL/pgSQL call and a lookup per run, 6 ms of a scheduler batch's 15 ms INSERT of 1 000 runs.
The tick already holds the owner (it claimed the agent rows, locked), so it writes it; the database
now holds the invariant like a composite foreign key (agent_id, owner_id) → agents (id, owner_id),
checked by one join per INSERT statement over its new rows (a transition table), without the unique
index on agents that a real composite key would need — an index every slot move of the tick would
have to write.

- An INSERT that leaves ``owner_id`` out (the ORM's: the column is not in the Django model) still
  has it filled from the agent, by the same row trigger, now only for those rows (``WHEN``).
- An INSERT that names an owner must name the agent's, or the statement fails with a
  foreign-key violation (``agents_agentrun_owner_is_agents_owner``); so does a run of no agent.
- An UPDATE of ``agent_id`` / ``owner_id`` is put right from the agent, as before (no code does it).
"""

from django.db import migrations

FORWARD = """
DROP TRIGGER IF EXISTS agents_run_owner_from_agent ON agent_runs;
CREATE TRIGGER agents_run_owner_fill BEFORE INSERT ON agent_runs
    FOR EACH ROW WHEN (NEW.owner_id IS NULL)
    EXECUTE FUNCTION agents_run_owner_from_agent();
CREATE TRIGGER agents_run_owner_from_agent BEFORE UPDATE OF agent_id, owner_id ON agent_runs
    FOR EACH ROW EXECUTE FUNCTION agents_run_owner_from_agent();

CREATE OR REPLACE FUNCTION agents_run_owner_check() RETURNS trigger AS $$
BEGIN
    IF EXISTS (
        SELECT FROM inserted_runs n
        WHERE NOT EXISTS (SELECT FROM agents a WHERE a.id = n.agent_id AND a.owner_id = n.owner_id)
    ) THEN
        RAISE EXCEPTION 'a run''s owner must be its agent''s owner'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'agents_agentrun_owner_is_agents_owner',
                  TABLE = 'agent_runs';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER agents_run_owner_check AFTER INSERT ON agent_runs
    REFERENCING NEW TABLE AS inserted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION agents_run_owner_check();
"""
REVERSE = """
DROP TRIGGER IF EXISTS agents_run_owner_check ON agent_runs;
DROP FUNCTION IF EXISTS agents_run_owner_check();
DROP TRIGGER IF EXISTS agents_run_owner_fill ON agent_runs;
DROP TRIGGER IF EXISTS agents_run_owner_from_agent ON agent_runs;
CREATE TRIGGER agents_run_owner_from_agent BEFORE INSERT OR UPDATE OF agent_id, owner_id ON agent_runs
    FOR EACH ROW EXECUTE FUNCTION agents_run_owner_from_agent();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0006_run_owner"),
    ]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
