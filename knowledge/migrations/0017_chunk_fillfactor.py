"""Room on every chunk page for one more version of its row (``fillfactor = 50``), so that a
restriction reaching a record's chunks updates them in place.

A chunk row carries its record's access (``acl``, ``acl_also``: copied by trigger, so each search
filters one table inside its index scan). A permission sync that adds a clause to thousands of
records (a view restriction on a Confluence space's home page) makes the trigger update every
chunk row of those records. With full pages (fillfactor 100: two ≈ 3.7 KB chunk rows per 8 KB
page) each new row version goes to another page and gets a new entry in every index of the table —
the HNSW graph (m = 32, ef_construction = 128), the text-search GIN (≈ 100 entries per chunk), the
ACL GIN, the btrees — ≈ 7.5 ms of CPU per chunk: 535 s for 33 288 chunks (docs/benchmarks/
ingest.md). No index covers ``acl_also`` (nor ``user_writable``'s partial one changes then), so
with room on the page PostgreSQL writes a heap-only tuple: no index entry at all (bench/acl_change
measures both). Half a page leaves that room for a chunk row up to ≈ 4 KB (bench/knowledge's
chunks average 3.7 KB: text, tsvector and the 384-dim embedding inline, migration 0003; 83 % of
its rows stayed in place, the larger ones still move); a later change finds the room again once the
earlier change's old versions are gone (autovacuum, or any reader of the page once no transaction
older than the change is running). The cost: the heap takes about twice the pages.

``VACUUM FULL`` rewrites the existing rows at the new fillfactor and rebuilds the table's indexes,
holding a lock on the table for the whole rewrite (100k chunks: ≈ 10 min on the 2-core
machine at load 12–15, most of it the HNSW build). The migration does it for a store of up to 50 000 chunks; a
larger one keeps its full pages until an operator runs ``VACUUM FULL knowledge_chunks`` in a
maintenance window (docs/operations.md) — until then a chunk's first access change moves it, once,
to a page with room. Outside a transaction (VACUUM cannot run in one). A change to ``acl`` itself
still writes index entries: ``acl`` is indexed (its GIN, the public HNSW index's predicate).
"""

from django.db import migrations

REWRITE_UP_TO = 50_000  # a few minutes of lock at most; larger stores: the operator's window


def rewrite(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_chunks")
        if cursor.fetchone()[0] <= REWRITE_UP_TO:
            cursor.execute("VACUUM FULL knowledge_chunks")


class Migration(migrations.Migration):
    atomic = False  # VACUUM cannot run inside a transaction block

    dependencies = [("knowledge", "0016_pending_links")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE knowledge_chunks SET (fillfactor = 50)",
            reverse_sql="ALTER TABLE knowledge_chunks RESET (fillfactor)",
        ),
        migrations.RunPython(rewrite, rewrite),
    ]
