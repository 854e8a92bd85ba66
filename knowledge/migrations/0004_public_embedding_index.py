"""A partial HNSW index over the chunks anonymous callers may read (``acl && '{public}'``).

Every anonymous search has the same principals, {public}, and public chunks are a small share of
the store: without this index the filtered HNSW scan walks the whole graph past every
non-public chunk (iterative scan). The planner proves ``acl && ARRAY['public']`` implies the
predicate and uses this index; it is maintained like any other, so an ACL change follows.
"""

from django.db import migrations

FORWARD = """
CREATE INDEX IF NOT EXISTS knowledge_chunk_embedding_public_hnsw ON knowledge_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)
    WHERE acl && '{public}'::text[];
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0003_chunk_storage")]

    operations = [
        migrations.RunSQL(FORWARD, reverse_sql="DROP INDEX IF EXISTS knowledge_chunk_embedding_public_hnsw"),
    ]
