"""Keep a chunk's tsvector and text inline in its heap tuple (no TOAST fetch per ranked row).

Ranking a level of lexical matches reads each matching row's tsvector; out-of-line TOAST would
cost one or two extra page reads per row. Rows stay well under a page (chunks are ≤ 300 tokens).
"""

from django.db import migrations

FORWARD = """
ALTER TABLE knowledge_chunks SET (toast_tuple_target = 8160);
ALTER TABLE knowledge_chunks ALTER COLUMN tsv SET STORAGE MAIN, ALTER COLUMN text SET STORAGE MAIN;
"""
BACKWARD = """
ALTER TABLE knowledge_chunks RESET (toast_tuple_target);
ALTER TABLE knowledge_chunks ALTER COLUMN tsv SET STORAGE EXTENDED, ALTER COLUMN text SET STORAGE EXTENDED;
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0002_database_invariants")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
