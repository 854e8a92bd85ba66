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
measures both). Half a page leaves that room for a chunk row up to ≈ 4 KB (the generated pages'
chunks average 3.7 KB: text, tsvector and the 384-dim embedding inline, migration 0003); a later
change finds it again once the earlier change's old versions are pruned (any reader of the page
does that). The cost: the heap takes about twice the pages.

``VACUUM FULL`` rewrites the existing rows at the new fillfactor (and rebuilds the table's
indexes): a lock on the table for the rewrite's duration, so the migration runs outside a
transaction. An any-of change (``acl`` itself) still writes index entries: ``acl`` is indexed (its
GIN, the public HNSW's predicate).
"""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False  # VACUUM cannot run inside a transaction block

    dependencies = [("knowledge", "0016_pending_links")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE knowledge_chunks SET (fillfactor = 50)",
            reverse_sql="ALTER TABLE knowledge_chunks RESET (fillfactor)",
        ),
        migrations.RunSQL("VACUUM FULL knowledge_chunks", reverse_sql="VACUUM FULL knowledge_chunks"),
    ]
