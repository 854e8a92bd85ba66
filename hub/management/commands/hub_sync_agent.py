"""Create a sync agent and print its token once: ``manage.py hub_sync_agent NAME`` (``--rotate`` for a new token)."""

from django.core.management.base import BaseCommand, CommandError

from achilles.errors import ApplicationError
from hub.models import SyncAgent
from hub.protocol import sync_agent_create, sync_agent_rotate


class Command(BaseCommand):
    help = "Create a sync agent (or --rotate its token) and print the token; it is shown only this once."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--rotate", action="store_true", help="Give an existing sync agent a new token.")

    def handle(self, *args, name: str, rotate: bool, **options):
        try:
            if rotate:
                agent = SyncAgent.objects.filter(name=name).first()
                if agent is None:
                    raise CommandError(f"no sync agent named {name}")
                raw = sync_agent_rotate(sync_agent=agent)
            else:
                _, raw = sync_agent_create(name=name)
        except ApplicationError as exc:
            raise CommandError(str(exc.detail)) from None
        self.stderr.write(f"Token of sync agent {name} (shown once; only its hash is stored):")
        self.stdout.write(raw)
