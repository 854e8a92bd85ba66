"""Rebuild the chunk embedding index as a denser HNSW graph (m=32, ef_construction=128).

On the 100k-chunk benchmark, recall@10 at ef_search=100 rose from 0.56 to 0.83 (and 0.97 at
400) for about 1.6x the scan time. ``IF NOT EXISTS`` lets a database that already has the index
(built out of band, e.g. the benchmark's) skip the rebuild.
"""

import pgvector.django.indexes
from django.db import migrations

FORWARD = """
DROP INDEX IF EXISTS knowledge_chunk_embedding_hnsw;
CREATE INDEX IF NOT EXISTS knowledge_chunk_emb_hnsw32 ON knowledge_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128);
"""
BACKWARD = """
DROP INDEX IF EXISTS knowledge_chunk_emb_hnsw32;
CREATE INDEX IF NOT EXISTS knowledge_chunk_embedding_hnsw ON knowledge_chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0004_public_embedding_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)],
            state_operations=[
                migrations.RemoveIndex(model_name="chunk", name="knowledge_chunk_embedding_hnsw"),
                migrations.AddIndex(
                    model_name="chunk",
                    index=pgvector.django.indexes.HnswIndex(
                        ef_construction=128,
                        fields=["embedding"],
                        m=32,
                        name="knowledge_chunk_emb_hnsw32",
                        opclasses=["vector_cosine_ops"],
                    ),
                ),
            ],
        ),
    ]
