"""Database-level invariants of the core: pgvector, the updated_at trigger, FK actions."""

from django.db import migrations

from achilles.db import AttachUpdatedAtTrigger, SetForeignKeyOnDelete

# Frozen: the function as this migration created it (0003 replaced it). Migrations are history, so
# the SQL lives here, not in a constant a later edit would silently rewrite.
BUMP_FUNCTION_SQL = """
CREATE OR REPLACE FUNCTION achilles_bump_updated_at() RETURNS trigger AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""


class Migration(migrations.Migration):
    dependencies = [("achilles", "0001_initial")]

    operations = [
        migrations.RunSQL("CREATE EXTENSION IF NOT EXISTS vector", reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(BUMP_FUNCTION_SQL, reverse_sql="DROP FUNCTION IF EXISTS achilles_bump_updated_at() CASCADE"),
        AttachUpdatedAtTrigger("platform_settings"),
        AttachUpdatedAtTrigger("agent_models"),
        AttachUpdatedAtTrigger("api_tokens"),
        SetForeignKeyOnDelete("apitoken", "user", "CASCADE"),
    ]
