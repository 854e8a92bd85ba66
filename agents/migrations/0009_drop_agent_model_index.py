"""Drop the index on ``agents.model_id``: every slot the tick moves wrote an entry into it.

A tick's UPDATE of ``next_run_at`` cannot be HOT (the due index covers the column), so each moved
agent is written anew into every index of ``agents``. The model index was the costliest of them: a
handful of allowed models for a million agents makes each of its keys a long run of duplicates
(posting lists split on insert); without it the UPDATE of a 1 000-agent batch writes one WAL record
and 58 bytes less per agent and takes ≈ 24 % less time (33 ms instead of 44 ms, measured side by
side at load 4). The only reader was the database's own ON DELETE SET NULL when a model leaves the
allow-list, which now reads the table once — the cost of that rare admin action is the agents it
changes, not the lookup. The foreign key and its action stay (only the index goes, by hand, as in
migration 0005: an AlterField would drop and re-create the constraint).
"""

import django.db.models.deletion
from django.db import migrations, models

DROP_SQL = "DROP INDEX IF EXISTS agents_model_id_b52b8d09"
RESTORE_SQL = "CREATE INDEX IF NOT EXISTS agents_model_id_b52b8d09 ON agents (model_id)"


class Migration(migrations.Migration):
    dependencies = [
        ("achilles", "0008_allowed_model"),
        ("agents", "0008_agent_runs_fillfactor"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(DROP_SQL, RESTORE_SQL)],
            state_operations=[
                migrations.AlterField(
                    model_name="agent",
                    name="model",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="agents",
                        to="achilles.allowedmodel",
                    ),
                ),
            ],
        ),
    ]
