"""Records people can write (security round two, finding 1): ``user_writable`` on each record, and
only the others count as evidence that a word is common when withheld is decided.

Existing records: what an admin ingested from a folder (origin ``ingest:…``) or a staff member wrote
through the REST upsert (origin ``api``) is curated; everything else (the hub's Jira mirror,
``app:…``) is not. Changing the flag moves the content generation (a trigger, as for the ACL), so no
cached word count outlives it."""

from django.db import migrations, models

FORWARD = """
UPDATE knowledge_records SET user_writable = false WHERE origin = 'api' OR origin LIKE 'ingest:%';
CREATE TRIGGER knowledge_records_generation_evidence
    AFTER UPDATE OF user_writable ON knowledge_records
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();
"""

BACKWARD = "DROP TRIGGER IF EXISTS knowledge_records_generation_evidence ON knowledge_records;"


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0010_chunk_gin_fastupdate_off")]

    operations = [
        migrations.AddField(
            model_name="record",
            name="user_writable",
            field=models.BooleanField(
                db_default=True,
                default=True,
                help_text="People other than admins can write this content (a Jira issue, an upload, an open "
                "wiki space): it never counts as evidence that a word is common when withheld hints are decided.",
            ),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
