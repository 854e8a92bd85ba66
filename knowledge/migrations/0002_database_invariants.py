"""What the database guarantees for the Knowledge Store (SPEC §1, KS-1, KS-6).

* FK actions at DB level (chunks, links and signals go with their record), updated_at triggers.
* ``knowledge_chunks.acl`` is a copy of the record's ACL, written only by triggers.
* ``sql()`` runs as the NOLOGIN role ``achilles_ks_reader``: it can read the ``ks_*`` views
  (``security_invoker``, so row-level security applies to it) and nothing else; the policies
  compare each row's ACL with the principals the caller set for the transaction in
  ``achilles.principals`` (separated by U+001F). No setting → no rows.
"""

from django.db import migrations

from achilles.db import AttachUpdatedAtTrigger, SetForeignKeyOnDelete

READER = "achilles_ks_reader"

CHUNK_ACL_SQL = """
CREATE OR REPLACE FUNCTION knowledge_chunk_copy_acl() RETURNS trigger AS $$
BEGIN
    NEW.acl := (SELECT acl FROM knowledge_records WHERE id = NEW.record_id);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE TRIGGER knowledge_chunks_copy_acl
    BEFORE INSERT OR UPDATE OF acl, record_id ON knowledge_chunks
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_copy_acl();

CREATE OR REPLACE FUNCTION knowledge_record_propagate_acl() RETURNS trigger AS $$
BEGIN
    UPDATE knowledge_chunks SET acl = NEW.acl WHERE record_id = NEW.id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE TRIGGER knowledge_records_propagate_acl
    AFTER UPDATE OF acl ON knowledge_records
    FOR EACH ROW WHEN (OLD.acl IS DISTINCT FROM NEW.acl)
    EXECUTE FUNCTION knowledge_record_propagate_acl();
"""

CHUNK_ACL_REVERSE = """
DROP TRIGGER IF EXISTS knowledge_records_propagate_acl ON knowledge_records;
DROP FUNCTION IF EXISTS knowledge_record_propagate_acl();
DROP TRIGGER IF EXISTS knowledge_chunks_copy_acl ON knowledge_chunks;
DROP FUNCTION IF EXISTS knowledge_chunk_copy_acl();
"""

# Roles are cluster-wide: several databases (tests run in parallel) may race to create it.
ROLE_SQL = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER}') THEN
        CREATE ROLE {READER} NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
DO $$
BEGIN
    IF NOT pg_has_role(current_user, '{READER}', 'MEMBER') THEN
        EXECUTE format('GRANT {READER} TO %I', current_user);
    END IF;
END $$;
"""

PRINCIPALS = "string_to_array(coalesce(current_setting('achilles.principals', true), ''), chr(31))"

VIEWS_SQL = f"""
CREATE VIEW ks_records WITH (security_invoker = true) AS
    SELECT id, source_system, external_id, title, url, author_principal_id, trust_score,
           created_at, updated_at, last_accessed_at
    FROM knowledge_records;
CREATE VIEW ks_record_links WITH (security_invoker = true) AS
    SELECT from_record_id, to_record_id, link_type, created_at
    FROM knowledge_record_links;
CREATE VIEW ks_chunks WITH (security_invoker = true) AS
    SELECT id, record_id, ordinal, heading, text
    FROM knowledge_chunks;

ALTER TABLE knowledge_records ENABLE ROW LEVEL SECURITY;
ALTER TABLE knowledge_chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE knowledge_record_links ENABLE ROW LEVEL SECURITY;

CREATE POLICY ks_reader_records ON knowledge_records FOR SELECT TO {READER}
    USING (acl && {PRINCIPALS});
CREATE POLICY ks_reader_chunks ON knowledge_chunks FOR SELECT TO {READER}
    USING (acl && {PRINCIPALS});
-- A link is visible when both ends are (the subqueries are themselves under RLS).
CREATE POLICY ks_reader_links ON knowledge_record_links FOR SELECT TO {READER}
    USING (EXISTS (SELECT 1 FROM knowledge_records r WHERE r.id = from_record_id)
           AND EXISTS (SELECT 1 FROM knowledge_records r WHERE r.id = to_record_id));

GRANT USAGE ON SCHEMA public TO {READER};
-- Column grants: the reader never sees ACLs, hashes, vectors or tsvectors even by accident.
GRANT SELECT (id, source_system, external_id, title, url, author_principal_id, trust_score,
              created_at, updated_at, last_accessed_at, acl) ON knowledge_records TO {READER};
GRANT SELECT (id, record_id, ordinal, heading, text, acl) ON knowledge_chunks TO {READER};
GRANT SELECT (from_record_id, to_record_id, link_type, created_at) ON knowledge_record_links TO {READER};
GRANT SELECT ON ks_records, ks_record_links, ks_chunks TO {READER};
"""

VIEWS_REVERSE = f"""
REVOKE ALL ON ks_records, ks_record_links, ks_chunks FROM {READER};
REVOKE ALL ON knowledge_records, knowledge_chunks, knowledge_record_links FROM {READER};
DROP POLICY IF EXISTS ks_reader_links ON knowledge_record_links;
DROP POLICY IF EXISTS ks_reader_chunks ON knowledge_chunks;
DROP POLICY IF EXISTS ks_reader_records ON knowledge_records;
ALTER TABLE knowledge_record_links DISABLE ROW LEVEL SECURITY;
ALTER TABLE knowledge_chunks DISABLE ROW LEVEL SECURITY;
ALTER TABLE knowledge_records DISABLE ROW LEVEL SECURITY;
DROP VIEW IF EXISTS ks_chunks;
DROP VIEW IF EXISTS ks_record_links;
DROP VIEW IF EXISTS ks_records;
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [
        AttachUpdatedAtTrigger("knowledge_records"),
        AttachUpdatedAtTrigger("knowledge_record_links"),
        SetForeignKeyOnDelete("chunk", "record", "CASCADE"),
        SetForeignKeyOnDelete("recordlink", "from_record", "CASCADE"),
        SetForeignKeyOnDelete("recordlink", "to_record", "CASCADE"),
        SetForeignKeyOnDelete("accesssignal", "record", "CASCADE"),
        migrations.RunSQL(CHUNK_ACL_SQL, reverse_sql=CHUNK_ACL_REVERSE),
        # The role outlives this database (it is cluster-wide), so reversing leaves it in place.
        migrations.RunSQL(ROLE_SQL, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(VIEWS_SQL, reverse_sql=VIEWS_REVERSE),
    ]
