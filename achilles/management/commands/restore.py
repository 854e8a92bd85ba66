"""`manage.py restore ARCHIVE`: a backup's database into the configured (empty) database."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from achilles.backup import BackupError, backup_restore


class Command(BaseCommand):
    help = (
        "Restore a backup archive into the configured database, which must be empty (stop the platform's "
        "processes first; run `manage.py migrate` after restoring an older release's backup)."
    )

    def add_arguments(self, parser):
        parser.add_argument("archive")

    def handle(self, *args, archive, **options):
        try:
            manifest = backup_restore(path=Path(archive))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"restored {manifest.database} as backed up at {manifest.created_at} (Achilles {manifest.version}); "
                "its configuration is config.env inside the archive"
            )
        )
