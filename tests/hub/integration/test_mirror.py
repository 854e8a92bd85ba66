"""The mirror (HUB-1..4): idempotent uploads, no going back, the issue card, HUB-3 filters, notes."""

import datetime as dt

import pytest

from achilles.errors import NotFound, ValidationFailed
from hub import selectors, services
from hub.contracts import IssueFilters
from hub.models import MirrorComment, MirrorIssue, MirrorLink
from tests.hub.conftest import issue_payload

pytestmark = pytest.mark.django_db


def test_the_same_page_twice_changes_nothing_and_older_is_stale(mirror):
    page = [
        issue_payload(
            "AURORA-1",
            links=[{"link_type": "Blocks", "direction": "outward", "other_key": "AURORA-2"}],
            comments=[{"id": 10001, "author": "jdoe", "created": "2026-11-30T10:00:00.000+0000", "body": "b"}],
        ),
        issue_payload("AURORA-2"),
    ]
    assert mirror(*page) == {"upserted": 2, "unchanged": 0, "stale": 0}
    before = MirrorIssue.objects.get(key="AURORA-1").mirrored_at
    assert mirror(*page) == {"upserted": 0, "unchanged": 2, "stale": 0}
    assert MirrorIssue.objects.get(key="AURORA-1").mirrored_at == before
    older = issue_payload("AURORA-1", updated="2026-11-30T11:00:00.000+0000", summary="старое")
    assert mirror(older) == {"upserted": 0, "unchanged": 0, "stale": 1}
    assert MirrorIssue.objects.get(key="AURORA-1").summary == "Задача AURORA-1"
    newer = issue_payload("AURORA-1", updated="2026-11-30T12:00:00.000+0300", summary="новое", links=[], comments=[])
    # 12:00+03:00 is 09:00 UTC — older than 11:50 UTC, so stale too: offsets are honoured.
    assert mirror(newer)["stale"] == 1
    newest = issue_payload("AURORA-1", updated="2026-11-30T15:00:00.000+0000", summary="новое", links=[], comments=[])
    assert mirror(newest) == {"upserted": 1, "unchanged": 0, "stale": 0}
    issue = MirrorIssue.objects.get(key="AURORA-1")
    assert issue.summary == "новое" and issue.updated == dt.datetime(2026, 11, 30, 15, tzinfo=dt.UTC)
    assert (
        not MirrorLink.objects.filter(issue=issue).exists() and not MirrorComment.objects.filter(issue=issue).exists()
    )


def test_sprint_of_dc_v2_is_read_from_the_greenhopper_string(mirror):
    mirror(
        issue_payload(
            "AURORA-3",
            sprint="com.atlassian.greenhopper.service.sprint.Sprint@1a2b[id=7,rapidViewId=1,"
            "state=ACTIVE,name=Спринт 2,startDate=2026-11-20]",
        )
    )
    assert MirrorIssue.objects.get(key="AURORA-3").sprint == "Спринт 2"


def test_issue_card_links_both_sides_notes_commands_and_comments(mirror, hub_user):
    comments = [
        {
            "id": str(i),
            "author": f"user{i}",
            "created": f"2026-11-{10 + i}T10:00:00.000+0000",
            "body": ("x" * 500) if i == 7 else f"комментарий {i}",
        }
        for i in range(1, 8)
    ]
    mirror(
        issue_payload(
            "AURORA-9001",
            comments=comments,
            links=[{"link_type": "Blocks", "direction": "outward", "other_key": "AURORA-9002"}],
        ),
        issue_payload("AURORA-9002"),
        issue_payload(
            "AURORA-9003", links=[{"link_type": "Relates", "direction": "outward", "other_key": "AURORA-9001"}]
        ),
    )
    services.notes_set(user=hub_user, key="AURORA-9001", fields={"fact_status": "ждём ревью", "owner": "Аня"})
    services.batch_create(
        user=hub_user, title="t", commands=[{"type": "ensure_comment", "key": "AURORA-9001", "body": "x"}]
    )
    card = selectors.issue_card(user=hub_user, key="aurora-9001")
    assert {(lk.link_type, lk.direction, lk.other_key) for lk in card.links} == {
        ("Blocks", "outward", "AURORA-9002"),
        ("Relates", "inward", "AURORA-9003"),
    }
    assert card.notes.fact_status == "ждём ревью" and card.notes.owner == "Аня"
    assert card.comments_total == 7 and len(card.comments) == 5
    assert card.comments[0].author == "user7" and len(card.comments[0].body) == 500
    assert [c.type for c in card.recent_commands] == ["refresh", "ensure_comment"]  # newest first
    assert card.description == "Описание AURORA-9001"
    with pytest.raises(NotFound):
        selectors.issue_card(user=hub_user, key="AURORA-1")


def test_hub3_filters(mirror, hub_user):
    mirror(
        issue_payload(
            "AURORA-1",
            status="In Progress",
            assignee="anna",
            sprint="Спринт 2",
            duedate="2020-01-01",
            labels=["AWPCA", "backend"],
            summary="Платёжный шлюз",
        ),
        issue_payload("AURORA-2", status="Done", duedate="2020-01-01", updated="2026-11-29T10:00:00.000+0000"),
        issue_payload("BOREAS-1", duedate=None),
    )
    services.notes_set(user=hub_user, key="AURORA-1", fields={"fact_status": "блокер"})

    def keys(**f):
        return [r.key for r in selectors.issues_list(user=hub_user, filters=IssueFilters(**f))]

    assert keys(project="AURORA") == ["AURORA-1", "AURORA-2"]
    assert keys(status="in progress") == ["AURORA-1"]
    assert keys(assignee="anna") == ["AURORA-1"]
    assert keys(sprint="Спринт 2") == ["AURORA-1"]
    assert keys(label="backend") == ["AURORA-1"]
    assert keys(fact_status="блокер") == ["AURORA-1"]
    assert keys(overdue=True) == ["AURORA-1"]  # AURORA-2 is done
    assert keys(due_from=dt.date(2019, 1, 1), due_to=dt.date(2021, 1, 1)) == ["AURORA-1", "AURORA-2"]
    assert keys(text="шлюз") == ["AURORA-1"]
    assert keys(updated_since=dt.datetime(2026, 11, 30, tzinfo=dt.UTC)) == ["AURORA-1", "BOREAS-1"]
    assert keys(project="AURORA", status="In Progress", assignee="anna") == ["AURORA-1"]
    assert len(selectors.issues_list(user=hub_user, filters=IssueFilters(), limit=1)) == 1
    row = selectors.issues_list(user=hub_user, filters=IssueFilters(fact_status="блокер"))[0]
    assert row.fact_status == "блокер" and row.sprint == "Спринт 2"


def test_notes_take_any_subset_and_refuse_unknown_fields(mirror, hub_user):
    mirror(issue_payload("AURORA-1"))
    services.notes_set(user=hub_user, key="AURORA-1", fields={"note": "n1", "next_step": "s1"})
    view = services.notes_set(user=hub_user, key="AURORA-1", fields={"next_step": None})
    assert (view.note, view.next_step) == ("n1", "")
    for bad in ({"colour": "red"}, {}, {"note": 5}, {"owner": "x" * 201}):
        with pytest.raises(ValidationFailed):
            services.notes_set(user=hub_user, key="AURORA-1", fields=bad)
    with pytest.raises(NotFound):
        services.notes_set(user=hub_user, key="AURORA-404", fields={"note": "x"})
    assert services.notes_set(user=hub_user, key="AURORA-1", fields={"owner": "b"}).note == "n1"


def test_a_page_repeating_a_link_or_a_comment_id_keeps_one(mirror):
    link = {"link_type": "Blocks", "direction": "outward", "other_key": "AURORA-2"}
    comment = {"id": "7", "author": "a", "created": "2026-11-30T10:00:00.000+0000", "body": "b"}
    assert (
        mirror(issue_payload("AURORA-1", links=[link, link], comments=[comment, {**comment, "body": "c"}]))["upserted"]
        == 1
    )
    issue = MirrorIssue.objects.get(key="AURORA-1")
    assert MirrorLink.objects.filter(issue=issue).count() == 1
    assert list(MirrorComment.objects.filter(issue=issue).values_list("body", flat=True)) == ["c"]
