"""Every bad input of issue 12 over REST: a clear 4xx in the API's shape, nothing stored, never a 500."""

import hashlib

import pytest

from hub import protocol
from hub.models import Batch, Command, MirrorIssue, RateLimitEvent, SyncRun
from tests.hub.conftest import issue_payload

pytestmark = pytest.mark.django_db

J = "application/json"


@pytest.fixture
def person(hub_user, token_for):
    return token_for(hub_user)


def _post(client, url, body, headers):
    return client.post(url, body, content_type=J, **headers)


def _error(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) >= {"detail", "code"}
    if code:
        assert body["code"] == code, body
    return body


@pytest.mark.parametrize(
    "commands, expected",
    [
        ([{"type": "ensure_magic", "key": "AURORA-1"}], "unknown command type «ensure_magic»"),
        ([{"type": "ensure_fields", "fields": {"duedate": "2026-12-01"}}], "key: required"),
        (
            [{"type": "ensure_link", "key": "AURORA-1", "link_type": "Befriends", "other_key": "AURORA-2"}],
            "unknown link type",
        ),
        ([{"type": "ensure_comment", "key": "$2", "body": "x"}], "must name an earlier command"),
        ("not a list", "must be a list"),
        ([], "must not be empty"),
    ],
)
def test_bad_commands_are_a_422_with_the_validation_text(client, person, commands, expected):
    body = _error(
        _post(client, "/api/hub/batches", {"title": "t", "commands": commands}, person), 422, "validation_error"
    )
    assert isinstance(body["detail"], str) and expected in body["detail"]
    assert Batch.objects.count() == 0 and Command.objects.count() == 0


def test_batch_body_shape_errors(client, person, hub_staff, token_for):
    _error(_post(client, "/api/hub/batches", {"commands": [{"type": "refresh", "full": True}]}, person), 422)
    _error(
        _post(client, "/api/hub/batches", {"title": " ", "commands": [{"type": "refresh", "full": True}]}, person), 422
    )
    _error(
        _post(
            client,
            "/api/hub/batches",
            {"title": "t", "commands": [{"type": "refresh", "full": True}], "author": "Robert'); DROP"},
            token_for(hub_staff),  # only staff may name an author; a malformed one is still a 422
        ),
        422,
    )
    _error(client.post("/api/hub/batches", "{not json", content_type=J, **person), 400, "bad_request")
    assert Batch.objects.count() == 0


@pytest.mark.parametrize("timeout", ["0", "61", "-5", "abc"])
def test_batch_wait_timeout_out_of_range(client, person, hub_user, timeout):
    from hub import services

    batch = services.batch_create(user=hub_user, title="t", commands=[{"type": "refresh", "full": True}])
    _error(client.get(f"/api/hub/batches/{batch.id}/wait?timeout_minutes={timeout}", **person), 422)


def test_unknown_ids_are_404(client, person):
    _error(client.get("/api/hub/batches/999999", **person), 404, "not_found")
    _error(client.get("/api/hub/batches/999999/wait?timeout_minutes=1", **person), 404)
    _error(_post(client, "/api/hub/batches/999999/cancel", {}, person), 404)
    _error(_post(client, "/api/hub/commands/999999/cancel", {"force": True}, person), 404)
    _error(_post(client, "/api/hub/commands/999999/retry", {}, person), 404)
    _error(client.get("/api/hub/issues/AURORA-404", **person), 404)
    _error(client.patch("/api/hub/issues/AURORA-404/notes", {"note": "x"}, content_type=J, **person), 404)
    assert Batch.objects.count() == 0


def test_claimed_command_cancel_without_force_is_409_with_the_seed_line(client, person, hub_user, sync_agent):
    from hub import services

    services.batch_create(
        user=hub_user, title="t", commands=[{"type": "ensure_comment", "key": "AURORA-1", "body": "x"}]
    )
    got = protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None, max_commands=1)[
        "commands"
    ][0]
    body = _error(_post(client, f"/api/hub/commands/{got['id']}/cancel", {}, person), 409, "command_claimed")
    assert body["detail"] == (
        f"команда #{got['id']} уже у агента и будет выполнена; "
        f"остановить — `POST /commands/{got['id']}/cancel` с `force: true`"
    )
    forced = _post(client, f"/api/hub/commands/{got['id']}/cancel", {"force": True}, person)
    assert forced.status_code == 200 and forced.json()["state"] == "cancelled"


def test_batch_cancel_lists_the_claimed_line(client, person, hub_user, sync_agent):
    from hub import services

    batch = services.batch_create(
        user=hub_user,
        title="t",
        commands=[
            {"type": "ensure_comment", "key": "AURORA-1", "body": "x"},
            {"type": "ensure_comment", "key": "AURORA-1", "body": "y"},
        ],
    )
    got = protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None, max_commands=1)[
        "commands"
    ][0]
    body = _post(client, f"/api/hub/batches/{batch.id}/cancel", {}, person).json()
    assert body["claimed"] == [got["id"]] and body["lines"][0].startswith(f"команда #{got['id']} уже у агента")


def test_notes_and_settings_bad_input(client, person, hub_staff, token_for, mirror):
    mirror(issue_payload("AURORA-1"))
    _error(client.patch("/api/hub/issues/AURORA-1/notes", {"colour": "red"}, content_type=J, **person), 422)
    staff = token_for(hub_staff)
    _error(client.put("/api/hub/settings/lease_seconds", {"value": 60}, content_type=J, **person), 403)
    _error(client.put("/api/hub/settings/lease_seconds", {"value": 5}, content_type=J, **staff), 422)
    _error(client.put("/api/hub/settings/colour", {"value": 5}, content_type=J, **staff), 422)
    _error(client.get("/api/hub/settings/colour", **person), 422)
    ok = client.put("/api/hub/settings/lease_seconds", {"value": 60}, content_type=J, **staff)
    assert ok.status_code == 200 and ok.json()["settings_version"] >= 2
    assert client.get("/api/hub/settings/lease_seconds", **person).json() == {"lease_seconds": 60}


def test_report_bad_input_stores_nothing(client, hub_user, sync_agent, sync_headers):
    from hub import services

    services.batch_create(
        user=hub_user, title="t", commands=[{"type": "ensure_comment", "key": "AURORA-1", "body": "x"}]
    )
    got = _post(client, "/api/hub/sync-agent/claim", {"version": 6}, sync_headers).json()["commands"][0]
    rate = [{"at": "2026-11-30T11:57:01.000+0000", "retry_after_seconds": 3, "path": "/rest/api/2/issue"}]
    forged = {
        "results": [{"command_id": got["id"], "lease_token": "forged", "status": "done", "result": {}}],
        "rate_limited": rate,
    }
    _error(_post(client, "/api/hub/sync-agent/report", forged, sync_headers), 409, "lease_mismatch")
    unknown = {"results": [{"command_id": 999999, "lease_token": "x", "status": "done"}], "rate_limited": rate}
    _error(_post(client, "/api/hub/sync-agent/report", unknown, sync_headers), 404)
    twice = {
        "results": [{"command_id": got["id"], "lease_token": got["lease_token"], "status": "done", "result": {}}] * 2
    }
    _error(_post(client, "/api/hub/sync-agent/report", twice, sync_headers), 422)
    _error(
        _post(
            client,
            "/api/hub/sync-agent/report",
            {"results": [{"command_id": got["id"], "status": "done"}]},
            sync_headers,
        ),
        422,
    )
    _error(
        _post(
            client,
            "/api/hub/sync-agent/report",
            {"results": [{"command_id": got["id"], "lease_token": got["lease_token"], "status": "failed"}]},
            sync_headers,
        ),
        422,
    )
    assert RateLimitEvent.objects.count() == 0 and Command.objects.get(pk=got["id"]).state == "claimed"
    good = {
        "results": [{"command_id": got["id"], "lease_token": got["lease_token"], "status": "done", "result": {}}],
        "rate_limited": rate,
    }
    assert _post(client, "/api/hub/sync-agent/report", good, sync_headers).json()["results"][0]["outcome"] == "applied"
    assert (
        _post(client, "/api/hub/sync-agent/report", good, sync_headers).json()["results"][0]["outcome"] == "duplicate"
    )
    assert RateLimitEvent.objects.count() == 1


def test_claim_and_upload_bad_input(client, sync_agent, sync_headers):
    for body in (
        {"version": 0},
        {"version": 6, "max_commands": 0},
        {"version": 6, "max_commands": 101},
        {"version": 6, "update": {"state": "exploded"}},
        {},
    ):
        _error(_post(client, "/api/hub/sync-agent/claim", body, sync_headers), 422)
    for issue in (
        issue_payload("aurora-1"),
        issue_payload("AURORA-1", project="BOREAS"),
        issue_payload("AURORA-1", updated="yesterday"),
        issue_payload("AURORA-1", links=[{"link_type": "Blocks", "direction": "up", "other_key": "AURORA-2"}]),
    ):
        _error(
            _post(client, "/api/hub/sync-agent/upload", {"issues": [issue_payload("AURORA-9"), issue]}, sync_headers),
            422,
        )
    _error(
        _post(
            client,
            "/api/hub/sync-agent/upload",
            {"issues": [issue_payload(f"AURORA-{i}") for i in range(1, 502)]},
            sync_headers,
        ),
        422,
    )
    assert MirrorIssue.objects.count() == 0
    _error(
        _post(
            client,
            "/api/hub/sync-agent/upload",
            {"sync_run_id": 999, "issues": [issue_payload("AURORA-1")]},
            sync_headers,
        ),
        404,
    )
    assert MirrorIssue.objects.count() == 0
    _error(_post(client, "/api/hub/sync-agent/sync-runs", {"kind": "partial"}, sync_headers), 422)
    _error(_post(client, "/api/hub/sync-agent/sync-runs/999/finish", {"status": "ok"}, sync_headers), 404)
    _error(client.get("/api/hub/sync-agent/publications/9", **sync_headers), 404)


def test_a_sync_run_of_another_agent_is_not_found(client, sync_agent, sync_headers):
    other, _raw = protocol.sync_agent_create(name="other")
    run = protocol.sync_run_start(sync_agent=other, kind="full")
    _error(_post(client, f"/api/hub/sync-agent/sync-runs/{run.id}/finish", {"status": "ok"}, sync_headers), 404)
    _error(
        _post(
            client,
            "/api/hub/sync-agent/upload",
            {"sync_run_id": run.id, "issues": [issue_payload("AURORA-1")]},
            sync_headers,
        ),
        404,
    )
    assert SyncRun.objects.get(pk=run.id).status == "running" and MirrorIssue.objects.count() == 0


def test_sync_runs_upload_and_publication_download(client, sync_agent, sync_headers, hub_user, token_for):
    run = _post(client, "/api/hub/sync-agent/sync-runs", {"kind": "full"}, sync_headers)
    assert run.status_code == 201
    run_id = run.json()["id"]
    up = _post(
        client,
        "/api/hub/sync-agent/upload",
        {"sync_run_id": run_id, "issues": [issue_payload("AURORA-1")]},
        sync_headers,
    )
    assert up.json() == {"upserted": 1, "unchanged": 0, "stale": 0}
    finish = {"status": "ok", "counts": {"issues": 1}, "errors": []}
    assert _post(client, f"/api/hub/sync-agent/sync-runs/{run_id}/finish", finish, sync_headers).status_code == 200
    assert _post(client, f"/api/hub/sync-agent/sync-runs/{run_id}/finish", finish, sync_headers).status_code == 200
    _error(_post(client, f"/api/hub/sync-agent/sync-runs/{run_id}/finish", {"status": "failed"}, sync_headers), 409)
    _error(
        _post(
            client,
            "/api/hub/sync-agent/upload",
            {"sync_run_id": run_id, "issues": [issue_payload("AURORA-2")]},
            sync_headers,
        ),
        409,
    )
    log = client.get("/api/hub/sync-log", **token_for(hub_user)).json()["items"]
    assert log[0]["kind"] == "full" and log[0]["status"] == "ok" and log[0]["counts"] == {"issues": 1}
    protocol.publication_create(version=3, artifact=b"tarball-bytes", notes="n")
    download = client.get("/api/hub/sync-agent/publications/3", **sync_headers)
    assert download.status_code == 200 and download.content == b"tarball-bytes"
    assert download["X-Checksum-SHA256"] == hashlib.sha256(b"tarball-bytes").hexdigest()
    claim = _post(client, "/api/hub/sync-agent/claim", {"version": 2}, sync_headers).json()
    assert (
        claim["publication"]["version"] == 3
        and claim["publication"]["download_url"] == "/api/hub/sync-agent/publications/3"
    )


def test_publications_over_rest_are_staff_only(client, person, hub_staff, token_for):
    import base64

    from hub.models import Publication

    def upload(headers, version):
        return client.post(
            "/api/hub/publications",
            {"version": version, "notes": "n", "artifact_base64": base64.b64encode(b"\x1f\x8bdata").decode()},
            content_type=J,
            **headers,
        )

    _error(upload(person, 5), 403)
    staff = token_for(hub_staff)
    created = upload(staff, 5)
    assert created.status_code == 201 and created.json()["sha256"] == hashlib.sha256(b"\x1f\x8bdata").hexdigest()
    _error(upload(staff, 5), 409, "publication_version")
    _error(upload(staff, 0), 422)
    _error(client.post("/api/hub/publications", {"version": 6, "artifact_base64": "%%%"}, content_type=J, **staff), 422)
    assert Publication.objects.count() == 1
    assert [p["version"] for p in client.get("/api/hub/publications", **person).json()["items"]] == [5]


@pytest.mark.parametrize("offset", ["-16:00", "+23:59", "-12:30", "+14:01"])
def test_updated_since_with_an_offset_no_zone_uses_is_a_422_naming_the_field(client, person, offset):
    """Failed before the fix: -16:00 parsed, and PostgreSQL refused it (InvalidTimeZoneDisplacementValue,
    a 500); timestamptz takes offsets under 16 hours, the Earth's run from -12:00 to +14:00."""
    # when
    response = client.get("/api/hub/issues", {"updated_since": f"2026-01-01T00:00:00{offset}"}, **person)
    # then
    body = _error(response, 422)
    assert [error["loc"] for error in body["detail"]] == [["query", "updated_since"]]


@pytest.mark.parametrize("offset", ["-12:00", "+14:00", "Z", "+05:30"])
def test_updated_since_takes_every_offset_in_use(client, person, mirror, offset):
    mirror(issue_payload("AURORA-1"))
    response = client.get("/api/hub/issues", {"updated_since": f"2000-01-01T00:00:00{offset}"}, **person)
    assert response.status_code == 200, response.content
    assert [row["key"] for row in response.json()["items"]] == ["AURORA-1"]


@pytest.mark.parametrize(
    "param, value", [("updated_since", "20200101"), ("updated_since", "0"), ("due_from", "0"), ("due_to", "86400")]
)
def test_a_number_where_a_date_is_meant_is_a_422_not_a_unix_timestamp(client, person, param, value):
    """Failed before the fix (found by make fuzz): pydantic read the number as a Unix timestamp, so
    updated_since=20200101 filtered from 1970-08-22 and answered 200."""
    body = _error(client.get("/api/hub/issues", {param: value}, **person), 422)
    assert [error["loc"] for error in body["detail"]] == [["query", param]]


@pytest.mark.parametrize(
    "body, field, message",
    [
        ({"note": 5}, "note", "a string (or null to clear)"),
        ({"fact_status": "x" * 10_000}, "fact_status", "at most"),
    ],
)
def test_a_bad_note_field_is_named_in_the_field_error(client, person, mirror, body, field, message):
    mirror(issue_payload("AURORA-1"))
    detail = _error(client.patch("/api/hub/issues/AURORA-1/notes", body, content_type=J, **person), 422)["detail"]
    assert isinstance(detail, list) and detail[0]["loc"][-1] == field, detail
    assert detail[0]["msg"].startswith(message), detail


@pytest.mark.parametrize("title, message", [(" ", "required"), ("x" * 301, "at most 300 characters")])
def test_a_bad_batch_title_is_named_in_the_field_error(client, person, title, message):
    commands = [{"type": "refresh", "full": True}]
    response = _post(client, "/api/hub/batches", {"title": title, "commands": commands}, person)
    detail = _error(response, 422, "validation_error")["detail"]
    assert isinstance(detail, list) and detail[0]["loc"][-1] == "title" and message in detail[0]["msg"], detail
    assert Batch.objects.count() == 0
