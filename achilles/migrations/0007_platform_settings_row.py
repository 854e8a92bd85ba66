"""The platform settings singleton exists from the start: reading it never writes."""

from django.db import migrations


def create_row(apps, schema_editor):
    apps.get_model("achilles", "PlatformSettings").objects.get_or_create(id=1)


class Migration(migrations.Migration):
    dependencies = [("achilles", "0006_agent_run_token_cap_db_default")]

    operations = [migrations.RunPython(create_row, reverse_code=migrations.RunPython.noop)]
