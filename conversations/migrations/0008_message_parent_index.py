"""The index that finds a message's versions (its parent's children), built without locking
``messages`` (a large table: docs/deployment.md «Upgrades»)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("conversations", "0007_branches_and_shares"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="message",
            index=models.Index(
                condition=models.Q(("parent__isnull", False)), fields=["parent"], name="messages_parent"
            ),
        ),
    ]
