"""The commands against the emulator (in process, loopback; no hub, no database): each changes Jira
once and a second run changes nothing; Jira's refusals fail the command with Jira's message; a
lost create answer is recovered from the entity property; the 429 loop paces and counts."""

from __future__ import annotations

import httpx
import pytest

from emulators.jira import build_store, start_in_thread
from syncagent.commands import Claimed, Executor
from syncagent.jiraclient import JiraGateway, JiraRateLimited
from syncagent.state import State

SETTINGS = {"base_label": "AWPCA", "lease_seconds": 120}


class Jira:
    def __init__(self):
        self.server = start_in_thread(build_store(data="demo", sync_token="sync-pat"))
        self.admin = httpx.Client(base_url=self.server.url, timeout=10)
        self.sleeps: list[float] = []
        self.events: list[dict] = []

    def gateway(self, **kw) -> JiraGateway:
        return JiraGateway(
            self.server.url, "sync-pat", on_rate_limited=self.events.append, sleep=self.sleeps.append, **kw
        )

    def faults(self, *rules):
        self.admin.post("/_emulator/faults", json={"rules": list(rules)}).raise_for_status()

    def seq(self) -> int:
        return self.admin.get("/_emulator/requests", params={"since": 10**9}).json()["seq"]

    def writes(self, since: int) -> list[str]:
        log = self.admin.get("/_emulator/requests", params={"since": since}).json()["requests"]
        return [
            f"{r['method']} {r['path']}"
            for r in log
            if r["method"] in ("POST", "PUT", "DELETE") and "/search" not in r["path"]
        ]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def jira():
    j = Jira()
    yield j
    j.close()


@pytest.fixture
def run(jira, tmp_path):
    state = State.open(tmp_path / "state")
    executor = Executor(
        jira.gateway(), state, lambda: SETTINGS, refresher=lambda **kw: {"issues": 0}, sleep=jira.sleeps.append
    )
    ids = iter(range(1, 1000))

    def go(command: dict, *, command_id: int | None = None, claims: int = 1) -> dict:
        cid = command_id or next(ids) + 100
        return executor.execute(
            Claimed(id=cid, batch_id=1, seq=1, claims=claims, lease_token="t", lease_expires_at=None, command=command)
        )

    return go


def test_every_ensure_changes_jira_once_then_is_already_so(jira, run):
    issue = {
        "type": "ensure_issue",
        "project": "AURORA",
        "summary": "Новая задача из чата",
        "issue_type": "Task",
        "labels": ["AWPCA"],
        "fields": {"priority": "High", "components": ["api"]},
    }
    since = jira.seq()
    first = run(issue)
    assert first["status"] == "done" and first["result"]["created"] is True
    key = first["result"]["key"]
    commands = [
        {
            "type": "ensure_fields",
            "key": key,
            "fields": {"duedate": "2026-12-24", "assignee": "jdoe", "customfield_10010": "Платежи"},
        },
        {"type": "ensure_link", "key": key, "link_type": "blocks", "direction": "inward", "other_key": "AURORA-9003"},
        {"type": "ensure_sprint", "key": key, "sprint": "Спринт 2"},
        {"type": "ensure_comment", "key": key, "body": "Первый комментарий"},
        {"type": "ensure_transition", "key": key, "status": "in review"},
    ]
    transition = run({"type": "ensure_transition", "key": key, "status": "In Progress"})
    assert transition["result"]["changed"] == ["status"]
    results = [run(c) for c in commands]
    assert [r["status"] for r in results] == ["done"] * 5, results
    assert results[0]["result"]["changed"] == ["assignee", "customfield_10010", "duedate"]
    writes = jira.writes(since)
    assert len(writes) == 7, writes  # create + transition + one write per command

    since = jira.seq()
    again = [run(issue)] + [run(c) for c in commands]
    assert all(r["status"] == "done" and r["result"]["changed"] == [] for r in again), again
    assert again[0]["result"] == {**again[0]["result"], "key": key, "created": False}
    assert jira.writes(since) == []

    fields = jira.server.store.get_issue(key)["fields"]
    assert fields["status"]["name"] == "In Review"
    assert [link["inwardIssue"]["key"] for link in fields["issuelinks"]] == ["AURORA-9003"]
    assert "name=Спринт 2" in fields["customfield_10020"][-1]


def test_jira_refusals_fail_the_command_with_jiras_message(jira, run):
    bad_priority = run({"type": "ensure_fields", "key": "AURORA-9004", "fields": {"priority": "Urgent"}})
    assert bad_priority["status"] == "failed" and bad_priority["error"].startswith(
        "Jira 400: priority: Specify a valid priority"
    )
    assert (
        run({"type": "ensure_fields", "key": "AURORA-1", "fields": {"duedate": "2026-12-01"}})["error"]
        == "Jira 404: Issue Does Not Exist"
    )
    jira.server.store.seed_issue(key="LEGACY-7", summary="Архивная", labels=["AWPCA"])
    forbidden = run({"type": "ensure_comment", "key": "LEGACY-7", "body": "x"})
    assert forbidden["error"] == "Jira 403: You do not have permission to edit issues in this project."
    jira.faults(
        {"kind": "error", "status": 409, "method": "PUT", "path": "AURORA-9005$", "message": "Issue is being edited"}
    )
    assert (
        run({"type": "ensure_fields", "key": "AURORA-9005", "fields": {"duedate": "2030-01-01"}})["error"]
        == "Jira 409: Issue is being edited"
    )
    unreachable = run({"type": "ensure_transition", "key": "AURORA-9001", "status": "In Review"})  # To Do → In Review
    assert unreachable["status"] == "failed"
    assert "reachable: Done, In Progress" in unreachable["error"]
    no_sprint = run({"type": "ensure_sprint", "key": "AURORA-9002", "sprint": "Спринт 9"})
    assert no_sprint["error"] == "no sprint 'Спринт 9' on the boards of AURORA (open: Спринт 1, Спринт 2)"
    no_type = run(
        {
            "type": "ensure_link",
            "key": "AURORA-9002",
            "link_type": "Causes",
            "direction": "outward",
            "other_key": "AURORA-9003",
        }
    )
    assert no_type["error"].startswith("Jira has no link type 'Causes'")


def test_lost_create_answer_is_found_by_its_property_not_created_twice(jira, tmp_path):
    """The search index lags 1.5 s behind the create (real sleeps here): searching again finds it."""
    import time

    executor = Executor(
        jira.gateway(), State.open(tmp_path / "s"), lambda: SETTINGS, refresher=lambda **kw: {}, sleep=time.sleep
    )

    def run(command, *, command_id):
        return executor.execute(
            Claimed(id=command_id, batch_id=1, seq=1, claims=1, lease_token="t", lease_expires_at=None, command=command)
        )

    jira.faults({"kind": "drop_answer", "method": "POST", "path": "^/rest/api/2/issue$", "times": 1})
    jira.admin.post("/_emulator/search-lag", json={"seconds": 1.5})  # the index lags behind the create
    since = jira.seq()
    result = run(
        {
            "type": "ensure_issue",
            "project": "AURORA",
            "summary": "Ответ потерян",
            "issue_type": "Task",
            "labels": ["AWPCA"],
            "fields": {},
        },
        command_id=77,
    )
    assert result["status"] == "done", result
    assert result["result"]["created"] is True and result["result"]["key"] == "AURORA-9031"
    assert jira.writes(since) == ["POST /rest/api/2/issue"]
    assert jira.server.store.issues["AURORA-9031"]["properties"]["achilles.hub"]["command"] == 77


def test_reissued_create_after_a_crash_adopts_the_issue_this_command_made(jira, run):
    """The previous run of command 88 created the issue and died before reporting (no local state):
    the re-issue (claims 2) searches own recent creates, even before the index has the summary."""
    store = jira.server.store
    created = store.create_issue(
        {
            "fields": {
                "project": {"key": "AURORA"},
                "summary": "Пережила падение",
                "issuetype": {"name": "Task"},
                "labels": ["OTHER"],
            },
            "properties": [{"key": "achilles.hub", "value": {"command": 88}}],
        },
        user="achilles-sync",
    )
    since = jira.seq()
    result = run(
        {
            "type": "ensure_issue",
            "project": "AURORA",
            "summary": "Пережила падение",
            "issue_type": "Task",
            "labels": ["OTHER"],
            "fields": {},
        },
        command_id=88,
        claims=2,
    )
    assert result["result"]["key"] == created["key"] and result["result"]["created"] is True
    assert jira.writes(since) == []


def test_comment_found_by_hash_of_the_sync_users_comments(jira, run):
    store = jira.server.store
    store.add_comment("AURORA-9007", {"body": "Сверить   выписки\r\nза ноябрь"}, user="achilles-sync")
    since = jira.seq()
    result = run({"type": "ensure_comment", "key": "AURORA-9007", "body": "Сверить выписки\nза ноябрь"})
    assert result["result"]["changed"] == [] and jira.writes(since) == []
    # the same text by a person is not ours: the sync agent adds its own
    store.add_comment("AURORA-9008", {"body": "Чужой текст"}, user="jdoe")
    assert run({"type": "ensure_comment", "key": "AURORA-9008", "body": "Чужой текст"})["result"]["changed"] == [
        "comment"
    ]


def test_429_loop_honours_retry_after_minimum_one_second_counts_and_caps(jira):
    gateway = jira.gateway(max_attempts=4)
    jira.faults(
        {"kind": "429", "method": "GET", "path": "/myself", "retry_after": "3", "times": 1},
        {"kind": "429", "method": "GET", "path": "/serverInfo", "retry_after": "0", "times": 2},
    )
    assert gateway.myself()["name"] == "achilles-sync"
    assert gateway.call("/rest/api/2/serverInfo", gateway.jira.get_server_info)["deploymentType"] == "Server"
    assert jira.sleeps == [3.0, 1.0, 1.0]
    assert [e["retry_after_seconds"] for e in jira.events] == [3.0, 0.0, 0.0]
    assert gateway.rate_limited_total == 3
    jira.faults({"kind": "429", "method": "GET", "path": "/field", "retry_after": "1", "times": 10})
    with pytest.raises(JiraRateLimited):
        gateway.sprint_field()
    assert gateway.rate_limited_total == 7  # capped at 4 attempts


def test_a_create_is_never_resent_after_a_503(jira, run):
    """503 on the create: we cannot know whether Jira made it — look first; absent → create again."""
    jira.faults({"kind": "503", "method": "POST", "path": "^/rest/api/2/issue$", "times": 1})
    since = jira.seq()
    result = run(
        {
            "type": "ensure_issue",
            "project": "AURORA",
            "summary": "После 503",
            "issue_type": "Task",
            "labels": ["AWPCA"],
            "fields": {},
        }
    )
    assert result["status"] == "done" and result["result"]["key"] == "AURORA-9031"
    assert jira.writes(since) == ["POST /rest/api/2/issue", "POST /rest/api/2/issue"]
    assert [k for k, i in jira.server.store.issues.items() if i["summary"] == "После 503"] == ["AURORA-9031"]


HOSTILE = [
    "C++ (phase 2)?",
    "Remove -legacy flag",
    'Fix "quoted" \\path\\ & a|b !x {y} [z] ^w ~v *u :t',
    "To be or not to be",  # stop words only
    "Релиз 🚀 AND OR NOT",
    ("Сверка платежей и отчётов по банку " * 8)[:255],
]


@pytest.mark.parametrize("summary", HOSTILE)
def test_hostile_summary_lost_answer_and_reissue_give_exactly_one_issue(jira, run, summary):
    """Jira's text search treats operators, stop words and stemming as Lucene does: whatever the
    summary, a lost create answer and a re-issued command find the issue instead of making a second."""
    command = {
        "type": "ensure_issue",
        "project": "AURORA",
        "summary": summary,
        "labels": ["AWPCA"],
        "fields": {"description": f"{summary}\n{summary}"},
    }
    jira.faults({"kind": "drop_answer", "method": "POST", "path": "^/rest/api/2/issue$", "times": 1})
    first = run(command)
    assert first["status"] == "done", first
    again = run(command)  # another command (a re-sent batch): found by its summary
    assert again["status"] == "done", again
    assert again["result"]["key"] == first["result"]["key"] and again["result"]["created"] is False
    assert again["result"]["changed"] == []
    same = [i for i in jira.server.store.issues.values() if i["summary"] == summary]
    assert len(same) == 1, [i["key"] for i in same]
    comment = {"type": "ensure_comment", "key": first["result"]["key"], "body": summary}
    assert [run(comment)["result"]["changed"] for _ in range(2)] == [["comment"], []]
    assert [c["body"] for c in same[0]["comments"]] == [summary]


def test_jiras_field_errors_and_a_plain_text_refusal_reach_the_report_verbatim(jira, run):
    jira.faults(
        {
            "kind": "error",
            "status": 400,
            "method": "PUT",
            "path": "AURORA-9005$",
            "message": None,
            "errors": {
                "customfield_10010": "Option id 'null' is not valid",
                "priority": "Priority name 'Urgent' is not valid",
            },
            "times": 1,
        },
        {"kind": "error", "status": 403, "method": "PUT", "path": "AURORA-9004$", "text": "XSRF check failed"},
    )
    fields = run({"type": "ensure_fields", "key": "AURORA-9005", "fields": {"duedate": "2030-01-01"}})
    assert fields["error"] == (
        "Jira 400: customfield_10010: Option id 'null' is not valid; priority: Priority name 'Urgent' is not valid"
    )
    xsrf = run({"type": "ensure_fields", "key": "AURORA-9004", "fields": {"duedate": "2030-01-01"}})
    assert xsrf["error"] == "Jira 403: XSRF check failed"
