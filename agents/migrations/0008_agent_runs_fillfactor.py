"""``agent_runs`` pages keep half their space free, so stamping ``enqueued_at`` is a HOT update.

After a scheduler batch is on the broker its 1 000 runs get ``enqueued_at`` (the re-dispatcher and
the due → enqueued lag read it). The column is in no index, but a freshly filled page has no room
for the new row version, so each stamp wrote the row anew into all six indexes of the table: 18 ms
and 8 WAL records a run per 1 000 runs, on the database's second core while the tick writes the
next batch. With room on the page the new version stays there and no index is touched (HOT): 4 ms
and 2 WAL records a run. The price is heap space (half-full pages where rows are inserted; an
UPDATE may still fill them); it applies to pages written from now on, nothing is rewritten.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0007_run_owner_checked_per_statement"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE agent_runs SET (fillfactor = 50)",
            "ALTER TABLE agent_runs RESET (fillfactor)",
        )
    ]
