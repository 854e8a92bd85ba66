"""Database-level invariants of the hub that Django's constraint API cannot spell: FK actions,
cross-column CHECKs through IMMUTABLE functions, the mirror's no-going-back trigger, the monotonic
settings version, and the singleton state row."""

from django.db import migrations

from achilles.db import SetForeignKeyOnDelete

CHECKS_SQL = """
CREATE OR REPLACE FUNCTION hub_seqs_before(deps integer[], seq integer) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce(bool_and(d >= 1 AND d < seq), true) FROM unnest(deps) AS d $$;
ALTER TABLE hub_commands ADD CONSTRAINT hub_command_depends_on_earlier CHECK (hub_seqs_before(depends_on, seq));
ALTER TABLE hub_commands ADD CONSTRAINT hub_command_payload_type_matches CHECK (payload ->> 'type' = type);
ALTER TABLE hub_commands ADD CONSTRAINT hub_command_live_lease_is_newest
    CHECK (lease_token IS NULL OR lease_token = lease_tokens[cardinality(lease_tokens)]);
ALTER TABLE hub_commands ADD CONSTRAINT hub_command_finished_lease_was_issued
    CHECK (finished_lease_token IS NULL OR finished_lease_token = ANY(lease_tokens));
ALTER TABLE hub_issues ADD CONSTRAINT hub_mirrorissue_key_in_project CHECK (split_part(key, '-', 1) = project);
ALTER TABLE hub_notes ADD CONSTRAINT hub_issuenote_text_bounded CHECK (char_length(note) <= 10000 AND char_length(next_step) <= 10000);
ALTER TABLE hub_publications ADD CONSTRAINT hub_publication_sha256_matches CHECK (sha256 = encode(sha256(artifact), 'hex'));
ALTER TABLE hub_publications ADD CONSTRAINT hub_publication_size_matches CHECK (size = octet_length(artifact));
"""
CHECKS_REVERSE = """
ALTER TABLE hub_commands DROP CONSTRAINT IF EXISTS hub_command_depends_on_earlier;
ALTER TABLE hub_commands DROP CONSTRAINT IF EXISTS hub_command_payload_type_matches;
ALTER TABLE hub_commands DROP CONSTRAINT IF EXISTS hub_command_live_lease_is_newest;
ALTER TABLE hub_commands DROP CONSTRAINT IF EXISTS hub_command_finished_lease_was_issued;
ALTER TABLE hub_issues DROP CONSTRAINT IF EXISTS hub_mirrorissue_key_in_project;
ALTER TABLE hub_notes DROP CONSTRAINT IF EXISTS hub_issuenote_text_bounded;
ALTER TABLE hub_publications DROP CONSTRAINT IF EXISTS hub_publication_sha256_matches;
ALTER TABLE hub_publications DROP CONSTRAINT IF EXISTS hub_publication_size_matches;
DROP FUNCTION IF EXISTS hub_seqs_before(integer[], integer);
"""

# An upload never moves a mirrored issue back to an older Jira version, whoever writes the row.
MIRROR_TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION hub_issues_refuse_older() RETURNS trigger AS $$
BEGIN
    IF NEW.updated < OLD.updated THEN
        RAISE EXCEPTION 'hub_issues: % updated % is older than the mirrored %', NEW.key, NEW.updated, OLD.updated
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hub_mirrorissue_updated_monotonic';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER hub_issues_refuse_older BEFORE UPDATE ON hub_issues
    FOR EACH ROW EXECUTE FUNCTION hub_issues_refuse_older();
"""
MIRROR_TRIGGER_REVERSE = """
DROP TRIGGER IF EXISTS hub_issues_refuse_older ON hub_issues;
DROP FUNCTION IF EXISTS hub_issues_refuse_older();
"""

# settings_version only grows: a sync agent holding version N must never see N again for other settings.
STATE_TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION hub_state_settings_version_monotonic() RETURNS trigger AS $$
BEGIN
    IF NEW.settings_version <= OLD.settings_version THEN
        RAISE EXCEPTION 'hub_state: settings_version must grow (% → %)', OLD.settings_version, NEW.settings_version
            USING ERRCODE = 'check_violation', CONSTRAINT = 'hub_hubstate_settings_version_monotonic';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER hub_state_settings_version_monotonic BEFORE UPDATE OF settings_version ON hub_state
    FOR EACH ROW EXECUTE FUNCTION hub_state_settings_version_monotonic();
CREATE OR REPLACE FUNCTION hub_state_no_delete() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'hub_state: the singleton row cannot be deleted'
        USING ERRCODE = 'check_violation', CONSTRAINT = 'hub_hubstate_not_deletable';
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER hub_state_no_delete BEFORE DELETE ON hub_state
    FOR EACH ROW EXECUTE FUNCTION hub_state_no_delete();
INSERT INTO hub_state (id, settings_version) VALUES (1, 1) ON CONFLICT DO NOTHING;
"""
STATE_TRIGGER_REVERSE = """
DROP TRIGGER IF EXISTS hub_state_settings_version_monotonic ON hub_state;
DROP FUNCTION IF EXISTS hub_state_settings_version_monotonic();
DROP TRIGGER IF EXISTS hub_state_no_delete ON hub_state;
DROP FUNCTION IF EXISTS hub_state_no_delete();
"""


class Migration(migrations.Migration):
    dependencies = [("hub", "0001_initial")]

    operations = [
        SetForeignKeyOnDelete("mirrorlink", "issue", "CASCADE"),
        SetForeignKeyOnDelete("mirrorcomment", "issue", "CASCADE"),
        SetForeignKeyOnDelete("issuenote", "issue", "CASCADE"),
        SetForeignKeyOnDelete("issuenote", "updated_by", "SET NULL"),
        SetForeignKeyOnDelete("batch", "created_by", "SET NULL"),
        SetForeignKeyOnDelete("batch", "retry_of", "SET NULL"),
        SetForeignKeyOnDelete("command", "batch", "CASCADE"),
        SetForeignKeyOnDelete("command", "claimed_by", "SET NULL"),
        SetForeignKeyOnDelete("syncagentcontact", "sync_agent", "CASCADE"),
        SetForeignKeyOnDelete("ratelimitevent", "sync_agent", "CASCADE"),
        SetForeignKeyOnDelete("syncrun", "sync_agent", "SET NULL"),
        SetForeignKeyOnDelete("publication", "published_by", "SET NULL"),
        SetForeignKeyOnDelete("hubsetting", "updated_by", "SET NULL"),
        migrations.RunSQL(CHECKS_SQL, reverse_sql=CHECKS_REVERSE),
        migrations.RunSQL(MIRROR_TRIGGER_SQL, reverse_sql=MIRROR_TRIGGER_REVERSE),
        migrations.RunSQL(STATE_TRIGGER_SQL, reverse_sql=STATE_TRIGGER_REVERSE),
    ]
