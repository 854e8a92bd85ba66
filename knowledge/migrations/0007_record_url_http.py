"""A record's url is empty or an http(s) address: citations turn it into a link, and a
``javascript:`` or ``data:`` url from a source document would run in the platform's origin.
Existing rows with anything else lose the url first (the record stays), then the CHECK holds."""

from django.db import migrations, models

URL_PATTERN = r"^https?://[^\s/?#]+[^\s]*$"  # knowledge.models.RECORD_URL_PATTERN, frozen here


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0006_content_generation")]

    operations = [
        migrations.RunSQL(
            [("UPDATE knowledge_records SET url = '' WHERE url <> '' AND url !~* %s", [URL_PATTERN])],
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddConstraint(
            model_name="record",
            constraint=models.CheckConstraint(
                condition=models.Q(("url", ""), ("url__iregex", URL_PATTERN), _connector="OR"),
                name="knowledge_record_url_http",
            ),
        ),
    ]
