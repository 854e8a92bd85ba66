"""Records people can write (security round two, finding 1): ``user_writable`` on each record, and
only the others count as evidence that a word is common when withheld is decided.

Existing records: what an admin ingested from a folder (origin ``ingest:…``) or a staff member wrote
through the REST upsert (origin ``api``) is curated; everything else (the hub's Jira mirror,
``app:…``) is not. The chunks carry a copy, written only by the trigger that copies the ACL, and a
partial text index over the curated ones serves the word counts: with the flag on the records
alone, a word in 20 000 Jira chunks and few curated ones cost 31 ms a count (a join per match).
Changing the flag moves the content generation, so no cached count outlives it."""

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations, models
from django.db.models import Q

FORWARD = """
UPDATE knowledge_records SET user_writable = false WHERE origin = 'api' OR origin LIKE 'ingest:%';

CREATE OR REPLACE FUNCTION knowledge_chunk_copy_acl() RETURNS trigger AS $$
BEGIN
    SELECT r.acl, r.user_writable INTO NEW.acl, NEW.user_writable
    FROM knowledge_records r WHERE r.id = NEW.record_id;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE TRIGGER knowledge_chunks_copy_acl
    BEFORE INSERT OR UPDATE OF acl, user_writable, record_id ON knowledge_chunks
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_copy_acl();

UPDATE knowledge_chunks c SET user_writable = r.user_writable
FROM knowledge_records r WHERE r.id = c.record_id AND c.user_writable IS DISTINCT FROM r.user_writable;

CREATE OR REPLACE FUNCTION knowledge_record_propagate_user_writable() RETURNS trigger AS $$
BEGIN
    UPDATE knowledge_chunks SET user_writable = NEW.user_writable WHERE record_id = NEW.id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER knowledge_records_propagate_user_writable
    AFTER UPDATE OF user_writable ON knowledge_records
    FOR EACH ROW WHEN (OLD.user_writable IS DISTINCT FROM NEW.user_writable)
    EXECUTE FUNCTION knowledge_record_propagate_user_writable();

CREATE TRIGGER knowledge_records_generation_evidence
    AFTER UPDATE OF user_writable ON knowledge_records
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS knowledge_records_generation_evidence ON knowledge_records;
DROP TRIGGER IF EXISTS knowledge_records_propagate_user_writable ON knowledge_records;
DROP FUNCTION IF EXISTS knowledge_record_propagate_user_writable();
CREATE OR REPLACE TRIGGER knowledge_chunks_copy_acl
    BEFORE INSERT OR UPDATE OF acl, record_id ON knowledge_chunks
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_copy_acl();
CREATE OR REPLACE FUNCTION knowledge_chunk_copy_acl() RETURNS trigger AS $$
BEGIN
    NEW.acl := (SELECT acl FROM knowledge_records WHERE id = NEW.record_id);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""

HELP = (
    "People other than admins can write this content (a Jira issue, an upload, an open wiki space): it never "
    "counts as evidence that a word is common when withheld hints are decided."
)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0010_chunk_gin_fastupdate_off")]

    operations = [
        migrations.AddField(
            model_name="record",
            name="user_writable",
            field=models.BooleanField(db_default=True, default=True, help_text=HELP),
        ),
        migrations.AddField(
            model_name="chunk",
            name="user_writable",
            field=models.BooleanField(db_default=True, default=True, editable=False),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
        migrations.AddIndex(
            model_name="chunk",
            index=GinIndex(
                condition=Q(user_writable=False),
                fastupdate=False,
                fields=["tsv"],
                name="knowledge_chunk_cur_tsv_gin",
            ),
        ),
    ]
