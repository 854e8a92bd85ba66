"""Mirror → Knowledge Store: mirrored issues are KS records (source_system="jira") under the project ACL."""

import pytest

from hub import services
from hub.knowledge_feed import mirror_to_knowledge
from hub.models import MirrorIssue
from knowledge import facade
from tests.achilles.factories import UserFactory
from tests.hub.conftest import issue_payload

pytestmark = pytest.mark.django_db


def test_an_upload_queues_the_feed_on_commit(mirror, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        mirror(issue_payload("AURORA-1"))
    assert len(callbacks) == 1
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        mirror(issue_payload("AURORA-1"))  # unchanged: nothing to feed
    assert callbacks == []


def test_mirrored_issues_are_searchable_under_the_project_acl(mirror, hub_staff):
    mirror(
        issue_payload(
            "AURORA-1",
            summary="Квазарный ускоритель платежей",
            links=[{"link_type": "Blocks", "direction": "outward", "other_key": "SECRET-1"}],
            comments=[
                {
                    "id": "1",
                    "author": "anna",
                    "created": "2026-11-30T10:00:00.000+0000",
                    "body": "Проверили на стенде квазарный режим",
                }
            ],
        ),
        issue_payload("SECRET-1", summary="Квазарный бюджет отдела"),
    )
    services.settings_set(user=hub_staff, key="project_acl", value={"SECRET": ["group:finance"]})
    assert mirror_to_knowledge(issue_ids=list(MirrorIssue.objects.values_list("id", flat=True))) == 2
    reader = UserFactory(username="reader")
    found = facade.search("квазарный", facade.Identity.for_user(reader))
    titles = [c.title for c in found.candidates]
    assert any(t.startswith("AURORA-1 ") for t in titles)
    assert not any(t.startswith("SECRET-1") for t in titles)
    assert {w.source_system for w in found.withheld} <= {"jira"}
    finance = UserFactory(username="fin", groups=["finance"])
    assert any(
        c.title.startswith("SECRET-1") for c in facade.search("квазарный", facade.Identity.for_user(finance)).candidates
    )
    aurora = next(c for c in found.candidates if c.title.startswith("AURORA-1 "))
    assert aurora.source_system == "jira"
    # Re-feeding is an upsert, not a second record.
    mirror_to_knowledge(issue_ids=list(MirrorIssue.objects.values_list("id", flat=True)))
    again = [c.record_id for c in facade.search("квазарный", facade.Identity.for_user(reader)).candidates]
    assert len(set(again)) == len({c.record_id for c in found.candidates})
