"""`make run`'s demo connector: «Confluence (демо)» on ``CONFLUENCE_URL`` with ``CONFLUENCE_TOKEN``
(the emulator's demo space KB unless the environment names another site), created once, its URL and
token brought up to date on every start (the emulator's port follows ``PORT``), and a content sync
queued (incremental after the first; nothing new is queued while one is in progress)."""

import os

from django.core.management.base import BaseCommand, CommandError

from achilles.errors import Conflict
from knowledge.connectors import services
from knowledge.connectors.models import Connector, RunKind

DEMO_NAME = "Confluence (демо)"


class Command(BaseCommand):
    help = "Configure the demo Confluence connector from CONFLUENCE_URL / CONFLUENCE_TOKEN and queue its sync."

    def handle(self, *args, **options):
        url = (os.environ.get("CONFLUENCE_URL") or "").strip()
        token = (os.environ.get("CONFLUENCE_TOKEN") or "").strip()
        if not url or not token:
            raise CommandError("CONFLUENCE_URL and CONFLUENCE_TOKEN are needed for the demo connector")
        spaces = [s.strip() for s in (os.environ.get("CONFLUENCE_SPACES") or "KB").split(",") if s.strip()]
        fields = services.ConnectorFields(kind="confluence", name=DEMO_NAME, base_url=url, token=token, spaces=spaces)
        existing = Connector.objects.filter(name=DEMO_NAME).first()
        if existing is None:
            connector = services.connector_create(actor="make run", fields=fields)
        else:
            connector = services.connector_update(
                actor="make run",
                connector_id=existing.pk,
                fields=services.ConnectorFields(base_url=url, token=token, spaces=spaces),
            )
        try:
            run = services.run_request(connector_id=connector.pk, kind=RunKind.CONTENT)
            queued = f"sync queued (run {run.pk})"
        except Conflict:
            queued = "a sync is already in progress"
        self.stdout.write(f"Demo connector «{connector.name}» on {url} (spaces {', '.join(spaces)}): {queued}.")
