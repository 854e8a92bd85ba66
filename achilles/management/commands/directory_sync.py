from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from achilles.directory.sync import directory_sync
from achilles.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Re-read every LDAP-sourced account from the directory: mirrored groups, attributes, and "
        "deactivation of accounts disabled in (or gone from) the directory. Beat runs the same job."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, no_progress, **options):
        bar = tqdm(unit="account", desc="directory sync", disable=no_progress, file=self.stderr)

        def total(count: int) -> None:
            bar.total = count
            bar.refresh()

        try:
            report = directory_sync(progress=bar.update, total=total)
        except ApplicationError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bar.close()
        self.stdout.write(
            f"checked {report.checked}, groups changed {report.groups_changed}, deactivated {report.deactivated}, "
            f"reactivated {report.reactivated}, failed {report.failed}"
        )
