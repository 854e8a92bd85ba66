"""The thinnest end-to-end path: a batch over REST, claimed and reported by the sync agent, waited for."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_batch_claim_report_wait(client, hub_user, token_for, sync_headers, mirror):
    from tests.hub.conftest import issue_payload

    mirror(issue_payload("AURORA-1538"), issue_payload("AURORA-1540"))
    person = token_for(hub_user)
    created = client.post(
        "/api/hub/batches",
        {
            "title": "1538 в спринт 2",
            "commands": [
                {"type": "ensure_fields", "key": "AURORA-1538", "fields": {"duedate": "2026-12-01"}},
                {
                    "type": "ensure_link",
                    "key": "AURORA-1538",
                    "link_type": "Blocks",
                    "direction": "outward",
                    "other_key": "AURORA-1540",
                },
                {"type": "ensure_sprint", "key": "AURORA-1538", "sprint": "Спринт 2"},
            ],
        },
        content_type="application/json",
        **person,
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["command_count"] == 4 and body["estimate_seconds"] > 0
    claim = client.post(
        "/api/hub/sync-agent/claim",
        {"version": 6, "launcher_version": 1, "settings_version": None},
        content_type="application/json",
        **sync_headers,
    )
    assert claim.status_code == 200, claim.content
    commands = claim.json()["commands"]
    assert [c["command"]["type"] for c in commands] == ["ensure_fields", "ensure_link", "ensure_sprint"]
    assert claim.json()["settings"]["base_label"] == "AWPCA"
    report = client.post(
        "/api/hub/sync-agent/report",
        {
            "results": [
                {"command_id": c["id"], "lease_token": c["lease_token"], "status": "done", "result": {"changed": []}}
                for c in commands
            ]
        },
        content_type="application/json",
        **sync_headers,
    )
    assert report.status_code == 200, report.content
    assert {r["outcome"] for r in report.json()["results"]} == {"applied"}
    claim2 = client.post(
        "/api/hub/sync-agent/claim",
        {"version": 6, "settings_version": claim.json()["settings_version"]},
        content_type="application/json",
        **sync_headers,
    ).json()
    assert claim2["settings"] is None
    assert [c["command"] for c in claim2["commands"]] == [{"type": "refresh", "keys": ["AURORA-1538", "AURORA-1540"]}]
    final = claim2["commands"][0]
    client.post(
        "/api/hub/sync-agent/report",
        {"results": [{"command_id": final["id"], "lease_token": final["lease_token"], "status": "done", "result": {}}]},
        content_type="application/json",
        **sync_headers,
    )
    waited = client.get(f"/api/hub/batches/{body['id']}/wait?timeout_minutes=1", **person)
    assert waited.status_code == 200, waited.content
    assert waited.json()["state"] == "done" and waited.json()["finished"] is True
