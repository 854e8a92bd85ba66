"""Demo data (make run): project AURORA, 30 issues with links and sprints, notes, AURORA-9001's 7 comments."""

import pytest
from django.core.management import call_command

from emulators.jira.dataset import demo_issues
from hub import selectors
from hub.contracts import IssueFilters
from hub.models import IssueNote, MirrorIssue

pytestmark = pytest.mark.django_db


def test_the_dataset_is_deterministic_and_in_the_upload_shape():
    issues = demo_issues()
    assert issues == demo_issues()
    assert [i["key"] for i in issues] == [f"AURORA-{n}" for n in range(9001, 9031)]
    first = issues[0]
    assert len(first["comments"]) == 7
    newest = max(first["comments"], key=lambda c: c["created"])
    assert len(newest["body"]) == 500
    assert {i["sprint"] for i in issues} == {"Спринт 1", "Спринт 2"}
    assert all("AWPCA" in i["labels"] for i in issues)


def test_demo_hub_is_idempotent_and_gives_the_demo_users_the_hub(db):
    call_command("demo_data")
    call_command("demo_data")
    assert MirrorIssue.objects.filter(project="AURORA").count() == 30
    assert IssueNote.objects.count() == 4
    from achilles.models import User

    demo = User.objects.get(username="demo")
    assert demo.has_perm("hub.use_hub")
    card = selectors.issue_card(user=demo, key="AURORA-9001")
    assert card.comments_total == 7 and len(card.comments[0].body) == 500
    assert {(lk.link_type, lk.direction, lk.other_key) for lk in card.links} >= {
        ("Blocks", "outward", "AURORA-9002"),
        ("Relates", "inward", "AURORA-9019"),
    }
    assert len(selectors.issues_list(user=demo, filters=IssueFilters(sprint="Спринт 2"))) == 15
