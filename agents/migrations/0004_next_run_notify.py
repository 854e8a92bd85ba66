"""The scheduler's wake-up: a next run set or moved earlier NOTIFYs ``agents_next_run``.

The scheduler loop (agents/scheduler_loop.py) sleeps until the earliest ``next_run_at``; an agent
whose next run becomes earlier than that (created, edited, a gate reopened, a time zone changed) must
wake it, whoever wrote the row — the API, the admin, a hook or plain SQL. Only the "earlier" edge
fires: the tick itself only moves slots later, so its own writes never wake it. The payload is
empty on purpose: PostgreSQL folds identical notifications of one transaction into one, so a bulk
UPDATE wakes the loop once.
"""

from django.db import migrations

NOTIFY_SQL = """
CREATE OR REPLACE FUNCTION agents_next_run_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('agents_next_run', '');
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER agents_next_run_notify_insert AFTER INSERT ON agents
    FOR EACH ROW WHEN (NEW.next_run_at IS NOT NULL)
    EXECUTE FUNCTION agents_next_run_notify();
CREATE OR REPLACE TRIGGER agents_next_run_notify_update AFTER UPDATE OF next_run_at ON agents
    FOR EACH ROW WHEN (NEW.next_run_at IS NOT NULL AND (OLD.next_run_at IS NULL OR NEW.next_run_at < OLD.next_run_at))
    EXECUTE FUNCTION agents_next_run_notify();
"""
NOTIFY_REVERSE = """
DROP TRIGGER IF EXISTS agents_next_run_notify_insert ON agents;
DROP TRIGGER IF EXISTS agents_next_run_notify_update ON agents;
DROP FUNCTION IF EXISTS agents_next_run_notify();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_run_worker_and_reasons"),
    ]

    operations = [migrations.RunSQL(NOTIFY_SQL, NOTIFY_REVERSE)]
