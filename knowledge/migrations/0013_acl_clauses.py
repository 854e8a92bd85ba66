"""«All of» access (issue 23): besides its any-of ``acl``, a record may carry ``acl_also``, further
any-of lists («clauses»); an identity reads it iff its principals meet ``acl`` and every clause.
A Confluence page is readable by those who pass the space permission (``acl``) and every restricted
ancestor's and the page's own view restriction (one clause each).

Storage: ``acl_also`` is jsonb, an array of non-empty arrays of principals, or NULL for no clause
(the one canonical «none»: ``'[]'`` is refused by the CHECK). The chunk's copy is written only by
the trigger that copies the ACL. Every path asks ``knowledge_acl_allows(acl, acl_also,
principals)``: an inlinable SQL function, so ``acl && principals`` stays a conjunct the GIN index
serves and the clauses are checked (``knowledge_acl_clauses_allow``) only on rows that have them.
The content generation moves when clauses change; the RLS policies of ``sql()`` use the same test.
"""

from django.db import migrations, models
from django.db.models import Func, Q

PRINCIPALS = "string_to_array(coalesce(current_setting('achilles.principals', true), ''), chr(31))"
READER = "achilles_ks_reader"

FUNCTIONS = """
CREATE OR REPLACE FUNCTION knowledge_acl_clauses_valid(clauses jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    clause jsonb;
    principal jsonb;
BEGIN
    IF clauses IS NULL THEN
        RETURN true;
    END IF;
    IF jsonb_typeof(clauses) <> 'array' OR jsonb_array_length(clauses) = 0 THEN
        RETURN false;
    END IF;
    FOR clause IN SELECT jsonb_array_elements(clauses) LOOP
        IF jsonb_typeof(clause) <> 'array' OR jsonb_array_length(clause) = 0 THEN
            RETURN false;
        END IF;
        FOR principal IN SELECT jsonb_array_elements(clause) LOOP
            IF jsonb_typeof(principal) <> 'string' OR principal #>> '{}' = '' THEN
                RETURN false;
            END IF;
        END LOOP;
    END LOOP;
    RETURN true;
END $$;

-- every clause (an array of principals) shares a principal with ``principals``
CREATE OR REPLACE FUNCTION knowledge_acl_clauses_allow(clauses jsonb, principals text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT NOT EXISTS (SELECT 1 FROM jsonb_array_elements(clauses) AS c WHERE NOT (c ?| principals))
$$;

-- the one access test; inlined by the planner (no FROM, not STRICT), so ``acl && principals``
-- stays a top-level conjunct for the GIN index and a row without clauses pays one null test
CREATE OR REPLACE FUNCTION knowledge_acl_allows(acl text[], acl_also jsonb, principals text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT acl && principals AND (acl_also IS NULL OR knowledge_acl_clauses_allow(acl_also, principals))
$$;
"""

FUNCTIONS_REVERSE = """
DROP FUNCTION IF EXISTS knowledge_acl_allows(text[], jsonb, text[]);
DROP FUNCTION IF EXISTS knowledge_acl_clauses_allow(jsonb, text[]);
DROP FUNCTION IF EXISTS knowledge_acl_clauses_valid(jsonb);
"""

TRIGGERS = f"""
CREATE OR REPLACE FUNCTION knowledge_chunk_copy_acl() RETURNS trigger AS $$
BEGIN
    SELECT r.acl, r.acl_also, r.user_writable INTO NEW.acl, NEW.acl_also, NEW.user_writable
    FROM knowledge_records r WHERE r.id = NEW.record_id;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE TRIGGER knowledge_chunks_copy_acl
    BEFORE INSERT OR UPDATE OF acl, acl_also, user_writable, record_id ON knowledge_chunks
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_copy_acl();

CREATE OR REPLACE FUNCTION knowledge_record_propagate_acl() RETURNS trigger AS $$
BEGIN
    UPDATE knowledge_chunks SET acl = NEW.acl, acl_also = NEW.acl_also WHERE record_id = NEW.id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

DROP TRIGGER knowledge_records_propagate_acl ON knowledge_records;
CREATE TRIGGER knowledge_records_propagate_acl
    AFTER UPDATE OF acl, acl_also ON knowledge_records
    FOR EACH ROW WHEN (OLD.acl IS DISTINCT FROM NEW.acl OR OLD.acl_also IS DISTINCT FROM NEW.acl_also)
    EXECUTE FUNCTION knowledge_record_propagate_acl();

DROP TRIGGER knowledge_chunks_generation_update ON knowledge_chunks;
CREATE TRIGGER knowledge_chunks_generation_update
    AFTER UPDATE OF record_id, heading, text, acl, acl_also, embedding ON knowledge_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();
DROP TRIGGER knowledge_records_generation_update ON knowledge_records;
CREATE TRIGGER knowledge_records_generation_update
    AFTER UPDATE OF source_system, title, url, author_principal_id, acl, acl_also ON knowledge_records
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();

ALTER POLICY ks_reader_records ON knowledge_records USING (knowledge_acl_allows(acl, acl_also, {PRINCIPALS}));
ALTER POLICY ks_reader_chunks ON knowledge_chunks USING (knowledge_acl_allows(acl, acl_also, {PRINCIPALS}));
GRANT SELECT (acl_also) ON knowledge_records TO {READER};
GRANT SELECT (acl_also) ON knowledge_chunks TO {READER};
"""

TRIGGERS_REVERSE = f"""
REVOKE SELECT (acl_also) ON knowledge_chunks FROM {READER};
REVOKE SELECT (acl_also) ON knowledge_records FROM {READER};
ALTER POLICY ks_reader_records ON knowledge_records USING (acl && {PRINCIPALS});
ALTER POLICY ks_reader_chunks ON knowledge_chunks USING (acl && {PRINCIPALS});
DROP TRIGGER knowledge_records_generation_update ON knowledge_records;
CREATE TRIGGER knowledge_records_generation_update
    AFTER UPDATE OF source_system, title, url, author_principal_id, acl ON knowledge_records
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();
DROP TRIGGER knowledge_chunks_generation_update ON knowledge_chunks;
CREATE TRIGGER knowledge_chunks_generation_update
    AFTER UPDATE OF record_id, heading, text, acl, embedding ON knowledge_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_generation_bump();
DROP TRIGGER knowledge_records_propagate_acl ON knowledge_records;
CREATE TRIGGER knowledge_records_propagate_acl
    AFTER UPDATE OF acl ON knowledge_records
    FOR EACH ROW WHEN (OLD.acl IS DISTINCT FROM NEW.acl)
    EXECUTE FUNCTION knowledge_record_propagate_acl();
CREATE OR REPLACE FUNCTION knowledge_record_propagate_acl() RETURNS trigger AS $$
BEGIN
    UPDATE knowledge_chunks SET acl = NEW.acl WHERE record_id = NEW.id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER knowledge_chunks_copy_acl
    BEFORE INSERT OR UPDATE OF acl, user_writable, record_id ON knowledge_chunks
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_copy_acl();
CREATE OR REPLACE FUNCTION knowledge_chunk_copy_acl() RETURNS trigger AS $$
BEGIN
    SELECT r.acl, r.user_writable INTO NEW.acl, NEW.user_writable
    FROM knowledge_records r WHERE r.id = NEW.record_id;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""

RECORD_HELP = (
    "Further any-of lists of principals (clauses): a reader must match the acl and every clause. NULL: no clause."
)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0012_uploaded_documents")]

    operations = [
        migrations.AddField(
            model_name="record",
            name="acl_also",
            field=models.JSONField(blank=True, null=True, default=None, help_text=RECORD_HELP),
        ),
        migrations.AddField(
            model_name="chunk",
            name="acl_also",
            field=models.JSONField(blank=True, null=True, default=None, editable=False),
        ),
        migrations.RunSQL(FUNCTIONS, FUNCTIONS_REVERSE),
        migrations.AddConstraint(
            model_name="record",
            constraint=models.CheckConstraint(
                condition=Q(acl_also__isnull=True)
                | Q(Func("acl_also", function="knowledge_acl_clauses_valid", output_field=models.BooleanField())),
                name="knowledge_record_acl_also_valid",
                violation_error_message="Each clause of acl_also names at least one principal.",
            ),
        ),
        migrations.AddConstraint(
            model_name="chunk",
            constraint=models.CheckConstraint(
                condition=Q(acl_also__isnull=True)
                | Q(Func("acl_also", function="knowledge_acl_clauses_valid", output_field=models.BooleanField())),
                name="knowledge_chunk_acl_also_valid",
            ),
        ),
        migrations.RunSQL(TRIGGERS, TRIGGERS_REVERSE),
    ]
