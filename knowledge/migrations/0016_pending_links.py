"""Links whose target is not stored yet (``PendingLink``), resolved by the database on insert."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

from achilles.db import SetForeignKeyOnDelete

# A pending link becomes a link when its target's row is inserted, whatever inserts it (a batch's
# bulk insert, one upsert, raw SQL): one statement-level trigger over the inserted rows.
RESOLVE_SQL = """
CREATE OR REPLACE FUNCTION knowledge_resolve_pending_links() RETURNS trigger AS $$
BEGIN
    WITH resolved AS (
        DELETE FROM knowledge_pending_links p
        USING inserted_records n
        WHERE p.to_source_system = n.source_system AND p.to_external_id = n.external_id
        RETURNING p.from_record_id, n.id AS to_record_id, p.link_type
    )
    INSERT INTO knowledge_record_links (from_record_id, to_record_id, link_type)
    SELECT from_record_id, to_record_id, link_type FROM resolved WHERE from_record_id <> to_record_id
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE TRIGGER knowledge_records_resolve_pending_links
    AFTER INSERT ON knowledge_records
    REFERENCING NEW TABLE AS inserted_records
    FOR EACH STATEMENT EXECUTE FUNCTION knowledge_resolve_pending_links();
"""

RESOLVE_REVERSE = """
DROP TRIGGER IF EXISTS knowledge_records_resolve_pending_links ON knowledge_records;
DROP FUNCTION IF EXISTS knowledge_resolve_pending_links();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0015_source_policy_display_label"),
    ]

    operations = [
        migrations.CreateModel(
            name="PendingLink",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("to_source_system", models.CharField(max_length=64)),
                ("to_external_id", models.CharField(max_length=512)),
                ("link_type", models.CharField(max_length=64)),
                (
                    "created_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), editable=False),
                ),
                (
                    "from_record",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="pending_links_out",
                        to="knowledge.record",
                    ),
                ),
            ],
            options={
                "db_table": "knowledge_pending_links",
                "indexes": [
                    models.Index(fields=["to_source_system", "to_external_id"], name="knowledge_pending_link_to_idx")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("from_record", "to_source_system", "to_external_id", "link_type"),
                        name="knowledge_pending_link_unique",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("link_type", ""), _negated=True),
                        name="knowledge_pending_link_type_not_empty",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("to_external_id", ""), _negated=True),
                        name="knowledge_pending_link_target_not_empty",
                    ),
                ],
            },
        ),
        SetForeignKeyOnDelete("pendinglink", "from_record", "CASCADE"),
        migrations.RunSQL(RESOLVE_SQL, reverse_sql=RESOLVE_REVERSE),
    ]
