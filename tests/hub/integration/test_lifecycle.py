"""Command lifecycle on the real database (HUB-7/9): leases, re-issue, reports, cancel, retry, `$N`."""

import pytest
from django.db import connection

from achilles.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from hub import protocol, selectors, services
from hub.models import Batch, Command, RateLimitEvent
from hub.texts import claimed_command_line

pytestmark = pytest.mark.django_db


def _claim(agent, n=20, **kw):
    return protocol.sync_agent_claim(sync_agent=agent, version=6, launcher_version=1, max_commands=n, **kw)


def _done(agent, claimed, result=None):
    return protocol.sync_agent_report(
        sync_agent=agent,
        results=[
            {
                "command_id": c["id"],
                "lease_token": c["lease_token"],
                "status": "done",
                "result": result or {"changed": []},
            }
            for c in claimed
        ],
        rate_limited=[],
    )


def _expire(command_id):
    """Time passes: the lease of the command ran out."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE hub_commands SET lease_expires_at = now() - interval '1 second' WHERE id = %s", [command_id]
        )


COMMENT = {"type": "ensure_comment", "key": "AURORA-1", "body": "готово"}


def test_batch_create_appends_one_refresh_of_every_touched_key(hub_user):
    created = services.batch_create(
        user=hub_user,
        title="1538 в спринт 2",
        commands=[
            {"type": "ensure_fields", "key": "AURORA-1538", "fields": {"duedate": "2026-12-01"}},
            {"type": "ensure_link", "key": "AURORA-1538", "link_type": "Blocks", "other_key": "AURORA-1540"},
            {"type": "ensure_sprint", "key": "AURORA-1538", "sprint": "Спринт 2"},
        ],
    )
    assert created.command_count == 4
    last = Command.objects.get(batch_id=created.id, seq=4)
    assert last.payload == {"type": "refresh", "keys": ["AURORA-1538", "AURORA-1540"]} and last.waits_for_batch
    assert Batch.objects.get(pk=created.id).author == "api"
    # 10 s poll + 2 + 2 + 2 + 2 × 1 s refresh
    assert created.estimate_seconds == 10 + 6 + 2
    second = services.batch_create(user=hub_user, title="ещё", commands=[COMMENT], default_author="claude")
    assert second.estimate_seconds == 10 + 8 + 2 + 1  # the first batch's work (8 s) is ahead of it
    assert Batch.objects.get(pk=second.id).author == "claude"


def test_claims_follow_batch_order_and_the_refresh_waits_for_its_batch(hub_user, sync_agent):
    first = services.batch_create(user=hub_user, title="a", commands=[COMMENT, {**COMMENT, "body": "2"}])
    second = services.batch_create(user=hub_user, title="b", commands=[COMMENT])
    got = _claim(sync_agent, n=10)["commands"]
    # batch a: 2 comments (its refresh waits), batch b: 1 comment (its refresh waits)
    assert [(c["batch_id"], c["seq"]) for c in got] == [(first.id, 1), (first.id, 2), (second.id, 1)]
    assert _claim(sync_agent)["commands"] == []
    _done(sync_agent, got[:2])
    refresh = _claim(sync_agent)["commands"]
    assert [(c["batch_id"], c["seq"], c["command"]["type"]) for c in refresh] == [(first.id, 3, "refresh")]


def test_an_expired_lease_is_reissued_by_the_beat_job_with_claims_counted(hub_user, sync_agent):
    services.batch_create(user=hub_user, title="a", commands=[COMMENT])
    first = _claim(sync_agent)["commands"][0]
    assert first["claims"] == 1
    assert protocol.commands_requeue_expired() == []  # the lease is still live
    _expire(first["id"])
    assert protocol.commands_requeue_expired() == [first["id"]]
    command = Command.objects.get(pk=first["id"])
    assert command.state == "queued" and command.lease_token is None and command.claims == 1
    again = _claim(sync_agent)["commands"][0]
    assert again["id"] == first["id"] and again["claims"] == 2 and again["lease_token"] != first["lease_token"]
    status = selectors.agent_status(user=hub_user)
    assert [(r.id, r.claims) for r in status.reissued] == [(first["id"], 2)]
    assert f"- команда #{first['id']} ensure_comment: выдач 2" in status.lines
    assert "агент онлайн" in status.lines[0]


def test_a_claim_itself_reissues_an_expired_lease(hub_user, sync_agent):
    services.batch_create(user=hub_user, title="a", commands=[COMMENT])
    first = _claim(sync_agent)["commands"][0]
    _expire(first["id"])
    again = _claim(sync_agent)["commands"][0]
    assert (again["id"], again["claims"]) == (first["id"], 2)


def test_reports_late_duplicate_and_forged(hub_user, sync_agent):
    batch = services.batch_create(user=hub_user, title="a", commands=[COMMENT])
    old = _claim(sync_agent)["commands"][0]
    _expire(old["id"])
    new = _claim(sync_agent)["commands"][0]
    # A late report under the superseded lease is ignored and changes nothing.
    assert _done(sync_agent, [old]) == [{"command_id": old["id"], "outcome": "ignored"}]
    assert Command.objects.get(pk=old["id"]).state == "claimed"
    # A forged lease: 409, and nothing of that report (not even its 429s) is stored.
    with pytest.raises(Conflict) as exc:
        protocol.sync_agent_report(
            sync_agent=sync_agent,
            results=[{"command_id": new["id"], "lease_token": "f" * 32, "status": "done", "result": {}}],
            rate_limited=[{"at": "2026-11-30T11:00:00+00:00", "retry_after_seconds": 3, "path": "/x"}],
        )
    assert exc.value.code == "lease_mismatch"
    assert RateLimitEvent.objects.count() == 0 and Command.objects.get(pk=new["id"]).state == "claimed"
    with pytest.raises(NotFound):
        protocol.sync_agent_report(
            sync_agent=sync_agent,
            results=[{"command_id": 999999, "lease_token": "x", "status": "done", "result": {}}],
            rate_limited=[],
        )
    # The live lease applies once; the same report again is a duplicate.
    assert _done(sync_agent, [new]) == [{"command_id": new["id"], "outcome": "applied"}]
    assert _done(sync_agent, [new]) == [{"command_id": new["id"], "outcome": "duplicate"}]
    # A failure report for a done command is not the same result: ignored, still done.
    out = protocol.sync_agent_report(
        sync_agent=sync_agent,
        results=[{"command_id": new["id"], "lease_token": new["lease_token"], "status": "failed", "error": "x"}],
        rate_limited=[],
    )
    assert out == [{"command_id": new["id"], "outcome": "ignored"}]
    assert Command.objects.get(pk=new["id"]).state == "done"
    assert selectors.batch_status(user=hub_user, batch_id=batch.id).commands[0].state == "done"


def test_a_report_under_an_expired_but_not_reissued_lease_is_taken(hub_user, sync_agent):
    services.batch_create(user=hub_user, title="a", commands=[COMMENT])
    claimed = _claim(sync_agent)["commands"][0]
    _expire(claimed["id"])
    protocol.commands_requeue_expired()
    assert _done(sync_agent, [claimed]) == [{"command_id": claimed["id"], "outcome": "applied"}]
    assert Command.objects.get(pk=claimed["id"]).state == "done"


def test_rate_limited_events_are_stored_once(hub_user, sync_agent):
    event = {"at": "2026-11-30T11:57:01+00:00", "retry_after_seconds": 3, "path": "/rest/api/2/issue"}
    from django.utils import timezone

    event["at"] = timezone.now()
    protocol.sync_agent_report(sync_agent=sync_agent, results=[], rate_limited=[event])
    protocol.sync_agent_report(sync_agent=sync_agent, results=[], rate_limited=[event])
    assert RateLimitEvent.objects.count() == 1
    _claim(sync_agent)
    assert "429 за сутки: 1" in selectors.agent_status(user=hub_user).lines


def test_batch_cancel_cancels_the_queued_and_names_the_claimed(hub_user, sync_agent):
    batch = services.batch_create(user=hub_user, title="a", commands=[COMMENT, {**COMMENT, "body": "2"}])
    claimed = _claim(sync_agent, n=1)["commands"][0]
    result = services.batch_cancel(user=hub_user, batch_id=batch.id)
    assert result.claimed == (claimed["id"],)
    assert len(result.cancelled) == 2  # the second comment and the refresh
    assert services.batch_cancel_lines(result) == [claimed_command_line(claimed["id"])]
    assert result.batch.state == "running" and not result.batch.finished
    # The claimed one finishes normally; then the batch is finished.
    _done(sync_agent, [claimed])
    assert selectors.batch_status(user=hub_user, batch_id=batch.id).state == "partial"
    assert Batch.objects.get(pk=batch.id).finished_at is not None


def test_force_cancel_drops_a_claimed_command_and_tells_the_agent_once(hub_user, sync_agent):
    services.batch_create(user=hub_user, title="a", commands=[COMMENT])
    claimed = _claim(sync_agent)["commands"][0]
    with pytest.raises(Conflict) as exc:
        services.command_cancel(user=hub_user, command_id=claimed["id"])
    assert exc.value.detail == claimed_command_line(claimed["id"]) and exc.value.code == "command_claimed"
    view = services.command_cancel(user=hub_user, command_id=claimed["id"], force=True)
    assert view.state == "cancelled" and view.force_cancelled
    assert _claim(sync_agent)["cancelled"] == [claimed["id"]]
    assert _claim(sync_agent)["cancelled"] == []
    assert _done(sync_agent, [claimed]) == [{"command_id": claimed["id"], "outcome": "ignored"}]
    assert Command.objects.get(pk=claimed["id"]).state == "cancelled"
    with pytest.raises(Conflict):
        services.command_cancel(user=hub_user, command_id=claimed["id"], force=True)


def test_dollar_n_waits_for_the_created_key_and_is_substituted(hub_user, sync_agent):
    batch = services.batch_create(
        user=hub_user,
        title="новая",
        commands=[
            {"type": "ensure_issue", "project": "AURORA", "summary": "Новая", "labels": ["AWPCA"]},
            {"type": "ensure_link", "key": "$1", "link_type": "Blocks", "other_key": "AURORA-1540"},
        ],
    )
    first = _claim(sync_agent)["commands"]
    assert [c["command"]["type"] for c in first] == ["ensure_issue"]
    with pytest.raises(ValidationFailed):  # an ensure_issue done without its key is refused
        _done(sync_agent, first, result={"created": True})
    _done(sync_agent, first, result={"key": "AURORA-2001", "created": True, "changed": []})
    link = _claim(sync_agent)["commands"]
    assert link[0]["command"] == {
        "type": "ensure_link",
        "key": "AURORA-2001",
        "link_type": "Blocks",
        "direction": "outward",
        "other_key": "AURORA-1540",
    }
    _done(sync_agent, link)
    refresh = _claim(sync_agent)["commands"]
    assert refresh[0]["command"] == {"type": "refresh", "keys": ["AURORA-2001", "AURORA-1540"]}
    assert selectors.batch_status(user=hub_user, batch_id=batch.id).commands[0].key == "AURORA-2001"


def test_a_failed_dependency_fails_its_dependents_with_its_name(hub_user, sync_agent):
    batch = services.batch_create(
        user=hub_user,
        title="новая",
        commands=[
            {"type": "ensure_issue", "project": "AURORA", "summary": "Новая", "labels": ["AWPCA"]},
            {"type": "ensure_comment", "key": "$1", "body": "x"},
            {"type": "ensure_comment", "key": "$1", "body": "y"},
        ],
    )
    first = _claim(sync_agent)["commands"][0]
    protocol.sync_agent_report(
        sync_agent=sync_agent,
        results=[
            {
                "command_id": first["id"],
                "lease_token": first["lease_token"],
                "status": "failed",
                "error": "Jira 400: Field 'priority' cannot be set",
            }
        ],
        rate_limited=[],
    )
    view = selectors.batch_status(user=hub_user, batch_id=batch.id)
    assert [c.state for c in view.commands[:3]] == ["failed", "failed", "failed"]
    assert view.commands[1].error.startswith(f"не выполнена: зависит от команды $1 (#{first['id']}, failed)")
    # The refresh has nothing left to refresh: finished by the hub, the batch is final.
    assert _claim(sync_agent)["commands"] == []
    view = selectors.batch_status(user=hub_user, batch_id=batch.id)
    assert view.finished and view.state == "partial"


def test_command_retry_makes_a_new_batch(hub_user, sync_agent):
    services.batch_create(user=hub_user, title="a", commands=[COMMENT])
    claimed = _claim(sync_agent)["commands"][0]
    with pytest.raises(Conflict):
        services.command_retry(user=hub_user, command_id=claimed["id"])
    protocol.sync_agent_report(
        sync_agent=sync_agent,
        results=[
            {
                "command_id": claimed["id"],
                "lease_token": claimed["lease_token"],
                "status": "failed",
                "error": "Jira 503",
            }
        ],
        rate_limited=[],
    )
    retry = services.command_retry(user=hub_user, command_id=claimed["id"], default_author="claude")
    batch = Batch.objects.get(pk=retry.id)
    assert batch.retry_of_id == claimed["id"] and batch.author == "claude" and retry.command_count == 2
    assert Command.objects.get(batch=batch, seq=1).payload == COMMENT
    with pytest.raises(NotFound):
        services.command_retry(user=hub_user, command_id=10**9)


def test_refresh_is_a_one_command_batch(hub_user):
    created = services.refresh(user=hub_user, keys=["aurora-1"])
    assert created.command_count == 1
    assert Command.objects.get(batch_id=created.id).payload == {"type": "refresh", "keys": ["AURORA-1"]}
    full = services.refresh(user=hub_user, full=True)
    assert Command.objects.get(batch_id=full.id).payload == {"type": "refresh", "full": True}
    with pytest.raises(ValidationFailed):
        services.refresh(user=hub_user)
    with pytest.raises(ValidationFailed):
        services.refresh(user=hub_user, keys=["$1"])


def test_settings_set_bumps_one_version_and_the_next_claim_carries_them(hub_user, hub_staff, sync_agent):
    first = _claim(sync_agent, settings_version=None)
    assert first["settings"]["lease_seconds"] == 120
    with pytest.raises(PermissionDenied):
        services.settings_set(user=hub_user, key="lease_seconds", value=60)
    version = services.settings_set(user=hub_staff, key="lease_seconds", value=60)
    assert version == first["settings_version"] + 1
    assert services.settings_set(user=hub_staff, key="base_label", value="AWPCA2") == version + 1
    with pytest.raises(ValidationFailed):
        services.settings_set(user=hub_staff, key="lease_seconds", value=5)
    assert selectors.settings_version_get() == version + 1
    again = _claim(sync_agent, settings_version=first["settings_version"])
    assert again["settings"]["lease_seconds"] == 60 and again["settings"]["base_label"] == "AWPCA2"
    assert _claim(sync_agent, settings_version=again["settings_version"])["settings"] is None
    assert selectors.settings_get(user=hub_user, key="lease_seconds") == {"lease_seconds": 60}


def test_outsiders_cannot_use_the_hub(outsider):
    with pytest.raises(PermissionDenied):
        services.batch_create(user=outsider, title="a", commands=[COMMENT])
    with pytest.raises(PermissionDenied):
        selectors.issues_list(user=outsider, filters=selectors.IssueFilters())
    assert Batch.objects.count() == 0


def test_command_retry_of_a_done_ensure_issue_queues_it_again(hub_user, sync_agent):
    """Issue 13: `command_retry` of a done `ensure_issue` is how a person re-ensures it (Jira adopts the
    existing issue). Failed before the fix: a done command was refused with 409 `command_done`."""
    ensure = {"type": "ensure_issue", "project": "AURORA", "summary": "Отчёт за ноябрь", "labels": ["AWPCA"]}
    services.batch_create(user=hub_user, title="отчёт", commands=[ensure])
    claimed = _claim(sync_agent)["commands"][0]
    _done(sync_agent, [claimed], result={"key": "AURORA-2001", "created": True, "changed": []})
    assert Command.objects.get(pk=claimed["id"]).state == "done"

    retry = services.command_retry(user=hub_user, command_id=claimed["id"], default_author="claude")

    batch = Batch.objects.get(pk=retry.id)
    assert batch.retry_of_id == claimed["id"] and retry.command_count == 2
    commands = list(Command.objects.filter(batch=batch).order_by("seq"))
    assert commands[0].payload == Command.objects.get(pk=claimed["id"]).payload and commands[0].state == "queued"
    assert commands[1].payload == {"type": "refresh", "keys": ["$1"]} and commands[1].waits_for_batch


def test_once_an_ensure_issue_reports_its_key_the_batch_s_commands_store_that_key_not_its_ref(hub_user, sync_agent):
    # given a batch that creates an issue, comments on it as $1 and refreshes it
    created = services.batch_create(
        user=hub_user,
        title="новая задача",
        commands=[
            {
                "type": "ensure_issue",
                "project": "AURORA",
                "summary": "Новая",
                "issue_type": "Task",
                "labels": ["AWPCA"],
            },
            {"type": "ensure_comment", "key": "$1", "body": "создано"},
        ],
    )
    [issue_cmd] = _claim(sync_agent, n=1)["commands"]
    # when the sync agent reports the key it created
    _done(sync_agent, [issue_cmd], result={"key": "AURORA-9100", "changed": ["created"]})
    # then no command of the batch keeps «$1» among its keys: the new issue's card lists them all
    keys = dict(Command.objects.filter(batch_id=created.id).values_list("seq", "keys"))
    assert keys == {1: ["AURORA-9100"], 2: ["AURORA-9100"], 3: ["AURORA-9100"]}, keys
