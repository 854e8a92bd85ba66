"""The platform settings singleton exists from the start: reading it never writes."""

from django.db import migrations


def create_row(apps, schema_editor):
    apps.get_model("achilles", "PlatformSettings").objects.get_or_create(id=1)


class Migration(migrations.Migration):
    dependencies = [("achilles", "0003_bump_updated_at_statement_time")]

    operations = [migrations.RunPython(create_row, reverse_code=migrations.RunPython.noop)]
