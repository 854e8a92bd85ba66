"""`manage.py backup ARCHIVE`: the database (one consistent pg_dump) and the configuration not in it."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from achilles.backup import BackupError, backup_create


class Command(BaseCommand):
    help = "Write a backup archive: pg_dump of the database, the configuration, a manifest (docs/deployment.md)."

    def add_arguments(self, parser):
        parser.add_argument("archive", help="where to write the archive (a .tar file, mode 0600: it holds secrets)")

    def handle(self, *args, archive, **options):
        try:
            manifest = backup_create(path=Path(archive))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(f"backup of {manifest.database} (Achilles {manifest.version}) written to {archive}")
        )
