"""The hub's demo content for `make run`: the `hub` group, project AURORA mirrored, notes (idempotent)."""

from django.core.management.base import BaseCommand
from django.db import transaction

from achilles.models import User
from emulators.jira.dataset import demo_issues, demo_notes
from hub.models import IssueNote, MirrorIssue
from hub.permissions import hub_group_ensure
from hub.protocol import mirror_upload
from hub.schemas import UploadIn


class Command(BaseCommand):
    help = "Create the `hub` group and mirror the demo project AURORA (AURORA-9001 … 9030) with notes (idempotent)."

    def handle(self, *args, **options):
        with transaction.atomic():
            group = hub_group_ensure()
            members = list(User.objects.filter(username__in=["admin", "demo"]))
            for user in members:
                user.groups.add(group)
            page = UploadIn.model_validate({"issues": demo_issues()})
            counts = mirror_upload(sync_agent=None, sync_run_id=None, issues=[i.model_dump() for i in page.issues])
            created_notes = 0
            for key, fields in demo_notes().items():
                issue = MirrorIssue.objects.get(key=key)
                _, created = IssueNote.objects.get_or_create(issue=issue, defaults=fields)
                created_notes += int(created)
        self.stdout.write(
            f"Hub demo: project AURORA mirrored ({counts['upserted']} written, {counts['unchanged']} unchanged), "
            f"{created_notes} notes added; group `hub`: {', '.join(u.username for u in members) or 'no demo users yet'}."
        )
