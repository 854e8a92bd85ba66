"""Ingest the demo corpus (`knowledge/demo_corpus`) — idempotent: a second run changes nothing."""

from pathlib import Path

from django.core.management.base import BaseCommand

from knowledge.ingest import ingest_path

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo_corpus"


class Command(BaseCommand):
    help = "Ingest the Russian demo corpus of the fictional company into the Knowledge Store."

    def handle(self, *args, **options):
        report = ingest_path(DEMO_CORPUS, prune=True)
        for relative, problem in report.errors + report.warnings:
            self.stderr.write(f"  {relative}: {problem}")
        self.stdout.write(f"Demo knowledge: {report.summary()}")
