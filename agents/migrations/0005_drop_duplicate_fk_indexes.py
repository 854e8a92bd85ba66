"""Drop the two foreign-key indexes that duplicate named ones: every agents UPDATE (the tick moves
each due agent's next_run_at) and every agent_runs INSERT maintained both copies.

Only the indexes go, by hand: Django's AlterField for db_index would also drop and re-create the
foreign keys (losing their database-level ON DELETE actions from 0002) and the partial UNIQUE.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

DROP_SQL = """
DROP INDEX IF EXISTS agents_owner_id_51db3e7c;
DROP INDEX IF EXISTS agent_runs_agent_id_589c2d4b;
"""
RESTORE_SQL = """
CREATE INDEX IF NOT EXISTS agents_owner_id_51db3e7c ON agents (owner_id);
CREATE INDEX IF NOT EXISTS agent_runs_agent_id_589c2d4b ON agent_runs (agent_id);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_next_run_notify"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(DROP_SQL, RESTORE_SQL)],
            state_operations=[
                migrations.AlterField(
                    model_name="agent",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="agents",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="agentrun",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="runs",
                        to="agents.agent",
                    ),
                ),
            ],
        ),
    ]
