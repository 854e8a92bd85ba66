"""`manage.py ingest PATH [--prune] [--default-acl everyone]`: a folder of Markdown / text / HTML."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from achilles.compat import command_output_stream
from knowledge.ingest import discover, ingest_path


class Command(BaseCommand):
    help = "Ingest a folder (or one file) of Markdown, text and HTML documents into the Knowledge Store."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument(
            "--prune", action="store_true", help="Delete records ingested earlier from this folder whose file is gone."
        )
        parser.add_argument(
            "--default-acl",
            default="everyone",
            help="Comma-separated principals for files without `acl:` (default: everyone).",
        )
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, path, prune, default_acl, no_progress, **options):
        root = Path(path)
        if not root.exists():
            raise CommandError(f"{root} does not exist")
        acl = tuple(p.strip() for p in default_acl.split(",") if p.strip())
        total = len(discover(root))
        with tqdm(
            total=total, unit="file", disable=no_progress or total == 0, file=command_output_stream(self.stderr)
        ) as bar:
            report = ingest_path(root, prune=prune, default_acl=acl, progress=lambda _file: bar.update(1))
        for relative, problem in report.errors:
            self.stderr.write(f"  failed  {relative}: {problem}")
        for relative, problem in report.warnings:
            self.stderr.write(f"  warning {relative}: {problem}")
        style = self.style.WARNING if report.errors else self.style.SUCCESS
        self.stdout.write(style(report.summary()))
        if report.errors:  # scripts and CI see a failed file in the exit status
            raise CommandError(f"{len(report.errors)} file(s) could not be ingested (listed above)")
