"""The updated_at trigger stamps the statement time (as the column defaults do)."""

from django.db import migrations

# Frozen SQL (migrations are history): the function after this migration, and before it.
BUMP_FUNCTION_SQL = """
CREATE OR REPLACE FUNCTION achilles_bump_updated_at() RETURNS trigger AS $$
BEGIN
    -- statement time, like the db_default of created_at/updated_at (Now() in Django);
    -- now() would be the transaction's start and could precede created_at.
    NEW.updated_at := statement_timestamp();
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""

PREVIOUS = """
CREATE OR REPLACE FUNCTION achilles_bump_updated_at() RETURNS trigger AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""


class Migration(migrations.Migration):
    dependencies = [("achilles", "0002_database_invariants")]

    operations = [migrations.RunSQL(BUMP_FUNCTION_SQL, reverse_sql=PREVIOUS)]
