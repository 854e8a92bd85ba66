"""The updated_at trigger stamps the statement time (as the column defaults do)."""

from django.db import migrations

from achilles.db import BUMP_FUNCTION_SQL

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
