"""The chunks' GIN indexes (ACL and text search) without a pending list (``fastupdate = off``).

With GIN's fast update, new entries wait in an unsorted pending list until a vacuum or the list's
limit (4 MB) moves them into the index — and every scan of the index reads the whole list. Search
scans the text index up to four times and the ACL index up to twice per query: at 100k chunks with
≈ 4 000 chunks' entries pending (134 pages), the lexical levels took 4.2 ms instead of 1.4 and the
first level 0.66 instead of 0.09 (bench/knowledge: knowledge/README.md § Benchmark). Without it
each insert updates the index in place: ≈ 1.6 ms more per record of five chunks — ingestion's cost,
paid once, instead of every search's. ``gin_clean_pending_list`` moves what is pending now.
"""

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations

INDEXES = ("knowledge_chunk_acl_gin", "knowledge_chunk_tsv_gin")
FORWARD = "".join(
    f"ALTER INDEX {name} SET (fastupdate = off); SELECT gin_clean_pending_list('{name}'::regclass);" for name in INDEXES
)
BACKWARD = "".join(f"ALTER INDEX {name} RESET (fastupdate);" for name in INDEXES)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0009_search_as_user_permission")]

    operations = [
        migrations.SeparateDatabaseAndState(
            # the storage parameter changes in place: no index is rebuilt
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)],
            state_operations=[
                migrations.RemoveIndex(model_name="chunk", name="knowledge_chunk_acl_gin"),
                migrations.RemoveIndex(model_name="chunk", name="knowledge_chunk_tsv_gin"),
                migrations.AddIndex(
                    model_name="chunk",
                    index=GinIndex(fields=["acl"], name="knowledge_chunk_acl_gin", fastupdate=False),
                ),
                migrations.AddIndex(
                    model_name="chunk",
                    index=GinIndex(fields=["tsv"], name="knowledge_chunk_tsv_gin", fastupdate=False),
                ),
            ],
        ),
    ]
