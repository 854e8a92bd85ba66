"""The emulator over HTTP: DC v2 shapes, PAT auth, state with `updated` and changelog, fault injection
(unit: an in-process server on loopback, no database)."""

from __future__ import annotations

import time

import httpx
import pytest

from emulators.jira import build_store, start_in_thread


@pytest.fixture
def emu():
    server = start_in_thread(build_store(data="demo", sync_token="sync-pat"))
    client = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer sync-pat"}, timeout=10)
    yield server, client
    client.close()
    server.shutdown()
    server.server_close()


def test_auth_cloud_only_and_jql_errors(emu):
    server, c = emu
    assert httpx.get(f"{server.url}/rest/api/2/myself").status_code == 401
    assert httpx.get(f"{server.url}/rest/api/2/myself", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert c.get("/rest/api/2/myself").json()["name"] == "achilles-sync"
    assert c.get("/rest/api/3/search/jql", params={"jql": "project = AURORA"}).status_code == 404
    bad = c.get("/rest/api/2/search", params={"jql": "labels = AWPCA AND fixVersion = 1.0"})
    assert bad.status_code == 400
    assert bad.json()["errorMessages"] == [
        "Field 'fixVersion' does not exist or you do not have permission to view it."
    ]
    missing = c.get("/rest/api/2/search", params={"jql": "key = AURORA-1"})
    assert missing.status_code == 400
    assert c.get("/rest/api/2/search", params={"jql": "key = AURORA-1", "validateQuery": "false"}).json()["total"] == 0


def test_demo_project_shapes(emu):
    _server, c = emu
    page = c.get(
        "/rest/api/2/search", params={"jql": "project = AURORA AND labels = AWPCA ORDER BY key ASC", "maxResults": 100}
    ).json()
    assert page["total"] == 30
    assert [i["key"] for i in page["issues"]][:2] == ["AURORA-9001", "AURORA-9002"]
    first = c.get("/rest/api/2/issue/AURORA-9001").json()["fields"]
    comments = first["comment"]["comments"]
    assert len(comments) == 7 and len(comments[-1]["body"]) == 500
    sprint = first["customfield_10020"][0]
    assert sprint.startswith("com.atlassian.greenhopper.service.sprint.Sprint@") and ",name=Спринт 1," in sprint
    assert "[id=1," in sprint and ",state=ACTIVE," in sprint
    out = [link for link in first["issuelinks"] if "outwardIssue" in link]
    assert {(link["type"]["name"], link["outwardIssue"]["key"]) for link in out} >= {("Blocks", "AURORA-9002")}
    # the other side sees the same link inward
    other = c.get("/rest/api/2/issue/AURORA-9002").json()["fields"]["issuelinks"]
    assert any(link.get("inwardIssue", {}).get("key") == "AURORA-9001" for link in other)
    fields = c.get("/rest/api/2/field").json()
    assert any(
        f["id"] == "customfield_10020" and f["schema"]["custom"] == "com.pyxis.greenhopper.jira:gh-sprint"
        for f in fields
    )
    agile = c.get("/rest/agile/1.0/issue/AURORA-9001").json()["fields"]["sprint"]
    assert agile["name"] == "Спринт 1"
    boards = c.get("/rest/agile/1.0/board", params={"projectKeyOrId": "AURORA"}).json()["values"]
    sprints = c.get(f"/rest/agile/1.0/board/{boards[0]['id']}/sprint", params={"state": "active,future"}).json()[
        "values"
    ]
    assert [s["name"] for s in sprints] == ["Спринт 1", "Спринт 2"]


def test_writes_move_updated_and_leave_a_changelog(emu):
    _server, c = emu
    before = c.get("/rest/api/2/issue/AURORA-9004").json()["fields"]["updated"]
    assert (
        c.put(
            "/rest/api/2/issue/AURORA-9004", json={"fields": {"duedate": "2027-02-01", "priority": {"name": "Lowest"}}}
        ).status_code
        == 204
    )
    issue = c.get("/rest/api/2/issue/AURORA-9004", params={"expand": "changelog"}).json()
    assert issue["fields"]["updated"] > before
    items = issue["changelog"]["histories"][-1]["items"]
    assert {i["field"] for i in items} == {"duedate", "priority"}
    found = c.get(
        "/rest/api/2/search",
        params={"jql": f'labels = AWPCA AND updated >= "{issue["fields"]["updated"][:16].replace("T", " ")}"'},
    ).json()
    assert "AURORA-9004" in [i["key"] for i in found["issues"]]
    created = c.post(
        "/rest/api/2/issue",
        json={
            "fields": {
                "project": {"key": "AURORA"},
                "summary": "Новая",
                "issuetype": {"name": "Task"},
                "labels": ["AWPCA"],
            },
            "properties": [{"key": "achilles.hub", "value": {"command": 5}}],
        },
    )
    assert created.status_code == 201
    key = created.json()["key"]
    assert key == "AURORA-9031"
    assert c.get(f"/rest/api/2/issue/{key}/properties/achilles.hub").json()["value"] == {"command": 5}
    bad = c.post(
        "/rest/api/2/issue",
        json={
            "fields": {
                "project": {"key": "AURORA"},
                "summary": "x",
                "issuetype": {"name": "Task"},
                "priority": {"name": "Urgent"},
                "customfield_99999": 1,
            }
        },
    )
    assert bad.status_code == 400 and set(bad.json()["errors"]) == {"priority", "customfield_99999"}
    assert c.put("/rest/api/2/issue/LEGACY-1", json={"fields": {}}).status_code == 404
    # transitions go by id; the names differ from the target statuses
    ts = c.get(f"/rest/api/2/issue/{key}/transitions").json()["transitions"]
    start = next(t for t in ts if t["to"]["name"] == "In Progress")
    assert start["name"] == "Start Progress"
    assert c.post(f"/rest/api/2/issue/{key}/transitions", json={"transition": {"id": start["id"]}}).status_code == 204
    assert c.get(f"/rest/api/2/issue/{key}").json()["fields"]["status"]["name"] == "In Progress"
    # identical links are accepted twice, as Jira does (readers must check first)
    link = {"type": {"name": "Blocks"}, "inwardIssue": {"key": key}, "outwardIssue": {"key": "AURORA-9003"}}
    assert c.post("/rest/api/2/issueLink", json=link).status_code == 201
    assert c.post("/rest/api/2/issueLink", json=link).status_code == 201
    assert len(c.get(f"/rest/api/2/issue/{key}").json()["fields"]["issuelinks"]) == 2


def test_faults_429_503_latency_and_dropped_answer(emu):
    server, c = emu
    c.post(
        "/_emulator/faults",
        json={
            "rules": [
                {"kind": "429", "method": "GET", "path": "/myself", "retry_after": "3", "times": 1},
                {"kind": "503", "method": "GET", "path": "/serverInfo", "times": 1},
                {"kind": "latency", "method": "GET", "path": "/field", "seconds": 0.3, "times": 1},
                {
                    "kind": "error",
                    "method": "PUT",
                    "path": "/issue/AURORA-9005$",
                    "status": 409,
                    "message": "Conflict!",
                    "times": 1,
                },
                {"kind": "drop_answer", "method": "POST", "path": "^/rest/api/2/issue$", "times": 1},
            ]
        },
    )
    r = c.get("/rest/api/2/myself")
    assert (r.status_code, r.headers["Retry-After"]) == (429, "3")
    assert c.get("/rest/api/2/myself").status_code == 200  # times: 1
    assert c.get("/rest/api/2/serverInfo").status_code == 503
    t = time.monotonic()
    assert c.get("/rest/api/2/field").status_code == 200 and time.monotonic() - t >= 0.3
    assert c.put("/rest/api/2/issue/AURORA-9005", json={"fields": {}}).json()["errorMessages"] == ["Conflict!"]
    with pytest.raises(httpx.HTTPError):
        c.post(
            "/rest/api/2/issue",
            json={"fields": {"project": {"key": "AURORA"}, "summary": "Без ответа", "issuetype": {"name": "Task"}}},
        )
    # the create happened although nobody heard about it
    assert "AURORA-9031" in server.store.issues
    log = c.get("/_emulator/requests").json()["requests"]
    assert [r["status"] for r in log if r["path"] == "/rest/api/2/myself"] == [429, 200]
