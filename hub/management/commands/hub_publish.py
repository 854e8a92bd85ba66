"""Publish a sync-agent version (HUB-13): ``manage.py hub_publish 7 dist/syncagent-7.tar.gz --notes "…"``."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from achilles.errors import ApplicationError
from hub.protocol import publication_create


class Command(BaseCommand):
    help = "Publish sync-agent version N from an artifact (.tar.gz); prints its sha256."

    def add_arguments(self, parser):
        parser.add_argument("version", type=int)
        parser.add_argument("artifact", type=Path)
        parser.add_argument("--notes", default="")

    def handle(self, *args, version: int, artifact: Path, notes: str, **options):
        if not artifact.is_file():
            raise CommandError(f"{artifact}: no such file")
        try:
            publication = publication_create(version=version, artifact=artifact.read_bytes(), notes=notes)
        except ApplicationError as exc:
            raise CommandError(str(exc.detail)) from None
        self.stdout.write(f"published v{publication.version}: {publication.size} bytes, sha256 {publication.sha256}")
