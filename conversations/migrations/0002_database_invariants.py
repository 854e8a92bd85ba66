"""Database-level invariants of the Query Engine tables: FK actions and updated_at triggers."""

from django.db import migrations

from achilles.db import AttachUpdatedAtTrigger, SetForeignKeyOnDelete


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0001_initial"),
        ("achilles", "0002_database_invariants"),  # achilles_bump_updated_at()
    ]

    operations = [
        AttachUpdatedAtTrigger("conversations"),
        AttachUpdatedAtTrigger("messages"),
        AttachUpdatedAtTrigger("retrieval_trace"),
        AttachUpdatedAtTrigger("message_citations"),
        SetForeignKeyOnDelete("conversation", "user", "CASCADE"),
        # A model removed from the allow-list: the thread falls back to the default (NULL = intent unset).
        SetForeignKeyOnDelete("conversation", "selected_model", "SET NULL"),
        SetForeignKeyOnDelete("message", "conversation", "CASCADE"),
        SetForeignKeyOnDelete("retrievaltrace", "message", "CASCADE"),
        SetForeignKeyOnDelete("citation", "message", "CASCADE"),
    ]
