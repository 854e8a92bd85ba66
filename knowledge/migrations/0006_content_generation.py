"""A content generation for caches of search results: a one-row counter that database triggers move
on every change of what search can return or who may see it (chunks inserted, deleted, truncated or
rewritten; a record's ACL, title, url, source or author changed). A cache keyed on it (the Query
Engine's candidate cache) can never serve results from before a change — a revoked ACL included.

Triggers, not code: every write path (ingest, the REST upsert, the admin, raw SQL) moves it. The
bump is transactional, so a reader that sees the new number also sees the change; concurrent
writers queue on the row until commit (writes to the store are short transactions).
"""

from django.db import migrations

FORWARD = """
CREATE TABLE knowledge_generation (
    id smallint PRIMARY KEY DEFAULT 1 CONSTRAINT knowledge_generation_single_row CHECK (id = 1),
    n bigint NOT NULL DEFAULT 0 CONSTRAINT knowledge_generation_not_negative CHECK (n >= 0)
);
INSERT INTO knowledge_generation (id, n) VALUES (1, 0);

CREATE FUNCTION knowledge_generation_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE knowledge_generation SET n = n + 1 WHERE id = 1;
    RETURN NULL;
END $$;

CREATE TRIGGER knowledge_chunks_generation_write
    AFTER INSERT OR DELETE OR TRUNCATE ON knowledge_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();
CREATE TRIGGER knowledge_chunks_generation_update
    AFTER UPDATE OF record_id, heading, text, acl, embedding ON knowledge_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();
CREATE TRIGGER knowledge_records_generation_update
    AFTER UPDATE OF source_system, title, url, author_principal_id, acl ON knowledge_records
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS knowledge_records_generation_update ON knowledge_records;
DROP TRIGGER IF EXISTS knowledge_chunks_generation_update ON knowledge_chunks;
DROP TRIGGER IF EXISTS knowledge_chunks_generation_write ON knowledge_chunks;
DROP FUNCTION IF EXISTS knowledge_generation_bump();
DROP TABLE IF EXISTS knowledge_generation;
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0005_denser_embedding_index")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
