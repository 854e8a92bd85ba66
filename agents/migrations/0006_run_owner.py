"""Each run carries its agent's owner (``agent_runs.owner_id``), set by the database.

The budget rule counts an owner's queued and running runs under their budget lock, for every owner
in every scheduler batch. Through ``agents`` that walked every agent of the owner (1.4 s of a tick
with 10 000 due among 1M agents); with the owner on the run it is one probe of a small partial
index; the week's spend per owner likewise. The column is the database's alone (not in the Django model): a BEFORE trigger copies it
from the agent on every INSERT and on a change of ``agent_id``, whatever the writer puts there, and
an owner change of an agent is carried to its runs. No foreign key of its own: the trigger keeps it
equal to the agent's owner, whose deletion already cascades through ``agents`` (a second check per
inserted run cost 20 ms a 1 000-run batch).
"""

from django.db import migrations

FORWARD = """
ALTER TABLE agent_runs ADD COLUMN owner_id bigint;
UPDATE agent_runs r SET owner_id = a.owner_id FROM agents a WHERE a.id = r.agent_id;
ALTER TABLE agent_runs ALTER COLUMN owner_id SET NOT NULL;
CREATE INDEX agents_agentrun_owner_active_idx ON agent_runs (owner_id)
    WHERE state IN ('queued', 'running');
CREATE INDEX agents_agentrun_owner_finished_idx ON agent_runs (owner_id, finished_at)
    WHERE finished_at IS NOT NULL;

CREATE OR REPLACE FUNCTION agents_run_owner_from_agent() RETURNS trigger AS $$
BEGIN
    SELECT owner_id INTO NEW.owner_id FROM agents WHERE id = NEW.agent_id;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER agents_run_owner_from_agent BEFORE INSERT OR UPDATE OF agent_id, owner_id ON agent_runs
    FOR EACH ROW EXECUTE FUNCTION agents_run_owner_from_agent();

CREATE OR REPLACE FUNCTION agents_owner_change_to_runs() RETURNS trigger AS $$
BEGIN
    UPDATE agent_runs SET owner_id = NEW.owner_id WHERE agent_id = NEW.id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER agents_owner_change_to_runs AFTER UPDATE OF owner_id ON agents
    FOR EACH ROW WHEN (OLD.owner_id IS DISTINCT FROM NEW.owner_id)
    EXECUTE FUNCTION agents_owner_change_to_runs();
"""
REVERSE = """
DROP TRIGGER IF EXISTS agents_owner_change_to_runs ON agents;
DROP FUNCTION IF EXISTS agents_owner_change_to_runs();
DROP TRIGGER IF EXISTS agents_run_owner_from_agent ON agent_runs;
DROP FUNCTION IF EXISTS agents_run_owner_from_agent();
ALTER TABLE agent_runs DROP COLUMN IF EXISTS owner_id;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0005_drop_duplicate_fk_indexes"),
    ]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
