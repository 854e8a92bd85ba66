"""Database-level invariants of the Agent Engine: FK actions, timestamps, gate and owner triggers."""

from django.db import migrations

from achilles.db import AttachUpdatedAtTrigger, SetForeignKeyOnDelete

# A closed gate (owner switch off, admin lock on, model removed) or a removed schedule takes the
# agent out of the scheduler's scan. As a trigger it also covers the FK's own ON DELETE SET NULL,
# which no application code sees.
GATE_TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION agents_clear_next_run_at_on_closed_gate() RETURNS trigger AS $$
BEGIN
    IF NOT NEW.enabled OR NEW.admin_paused OR NEW.model_id IS NULL OR NEW.schedule IS NULL
       OR jsonb_typeof(NEW.schedule) = 'null' THEN
        NEW.next_run_at := NULL;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER agents_clear_next_run_at_on_closed_gate BEFORE UPDATE ON agents
    FOR EACH ROW EXECUTE FUNCTION agents_clear_next_run_at_on_closed_gate();
"""
GATE_TRIGGER_REVERSE = """
DROP TRIGGER IF EXISTS agents_clear_next_run_at_on_closed_gate ON agents;
DROP FUNCTION IF EXISTS agents_clear_next_run_at_on_closed_gate();
"""

# Owner deactivated → every agent of theirs switched off (AE-GOV). Only the true → false edge
# fires: reactivation restores nothing, the owner re-enables agents by hand.
OWNER_TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION agents_disable_on_owner_deactivation() RETURNS trigger AS $$
BEGIN
    UPDATE agents SET enabled = false WHERE owner_id = NEW.id AND enabled;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER agents_disable_on_owner_deactivation AFTER UPDATE OF is_active ON users
    FOR EACH ROW WHEN (OLD.is_active AND NOT NEW.is_active)
    EXECUTE FUNCTION agents_disable_on_owner_deactivation();
"""
OWNER_TRIGGER_REVERSE = """
DROP TRIGGER IF EXISTS agents_disable_on_owner_deactivation ON users;
DROP FUNCTION IF EXISTS agents_disable_on_owner_deactivation();
"""


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]

    operations = [
        SetForeignKeyOnDelete("agent", "owner", "CASCADE"),
        SetForeignKeyOnDelete("agent", "model", "SET NULL"),
        SetForeignKeyOnDelete("agentrun", "agent", "CASCADE"),
        AttachUpdatedAtTrigger("agents"),
        AttachUpdatedAtTrigger("agent_runs"),
        migrations.RunSQL(GATE_TRIGGER_SQL, reverse_sql=GATE_TRIGGER_REVERSE),
        migrations.RunSQL(OWNER_TRIGGER_SQL, reverse_sql=OWNER_TRIGGER_REVERSE),
    ]
