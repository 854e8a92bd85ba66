"""Re-embed the store's chunks with the default embedding model (after a model change)."""

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from achilles.compat import command_output_stream
from knowledge.services import chunks_reembed


class Command(BaseCommand):
    help = (
        "Embed again every chunk of every record whose embedding model is not the default one "
        "(--all: every record), with a progress bar."
    )

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="re-embed every record, not only stale ones")
        parser.add_argument("--batch", type=int, default=32, help="chunks per embedding call")

    def handle(self, *args, all=False, batch=32, **options):
        with tqdm(
            total=0, unit="chunk", desc="re-embedding", file=command_output_stream(self.stderr), disable=None
        ) as bar:
            try:
                report = chunks_reembed(
                    everything=all, batch=batch, on_total=lambda n: bar.reset(total=n), on_progress=bar.update
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        self.stdout.write(f"{report.model}: {report.records} records, {report.chunks} chunks re-embedded")
