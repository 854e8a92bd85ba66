"""Measure the relevance floor of the default embedding model over the corpus in the store."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from achilles.models import AllowedModel
from knowledge.calibration import relevance_calibrate


class Command(BaseCommand):
    help = (
        "Print, per on-topic and off-topic question, the lexical match and the best similarity with "
        "the default embedding model; suggest the floor that separates them (--apply stores it)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--apply", action="store_true", help="write the suggested floor to the model's options.min_similarity"
        )

    def handle(self, *args, apply=False, **options):
        try:
            calibration = relevance_calibrate()
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"model: {calibration.model}   floor in use: {calibration.floor_in_use}")
        self.stdout.write(f"{'topic':<5} {'lexical':<7} {'similarity':>10}  question")
        for row in calibration.rows:
            similarity = "-" if row.similarity is None else f"{row.similarity:.3f}"
            self.stdout.write(
                f"{'on' if row.on_topic else 'off':<5} {'yes' if row.lexical else 'no':<7} "
                f"{similarity:>10}  {row.question}"
            )
        self.stdout.write(
            f"on-topic min: {calibration.on_topic_min}   off-topic max (no lexical match): {calibration.off_topic_max}"
        )
        if calibration.floor_in_use is not None:
            verdict = "separates" if calibration.separates(calibration.floor_in_use) else "does NOT separate"
            self.stdout.write(f"the floor in use {verdict} them")
        suggested = calibration.suggested
        if suggested is None:
            self.stdout.write(self.style.WARNING("no floor separates these questions with this model"))
            return
        self.stdout.write(self.style.SUCCESS(f"suggested floor: {suggested}"))
        if apply:
            with transaction.atomic():
                row = AllowedModel.objects.select_for_update().get(kind="embedding", is_default=True)
                row.options = {**row.options, "min_similarity": suggested}
                row.save(update_fields=["options"])
            self.stdout.write(f"stored as options.min_similarity of {row.name}")
