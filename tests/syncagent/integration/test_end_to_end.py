"""End to end with real processes: the hub under daphne, the Jira emulator, the sync agent under the
launcher. An MCP client's batch lands in "Jira" exactly once per command, the mirror is refreshed,
``batch_wait`` returns every command done, and the same batch again (or ``command_retry`` of its done
ensure_issue) changes nothing in Jira."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from tests.syncagent.harness import start_launcher, stop, wait_until

pytestmark = [pytest.mark.p0]

SUMMARY = "Сверка платежей с банком за ноябрь"


def batch_commands(summary: str = SUMMARY) -> list[dict]:
    return [
        {
            "type": "ensure_issue",
            "project": "AURORA",
            "summary": summary,
            "issue_type": "Task",
            "labels": ["AWPCA"],
            "fields": {"priority": "High", "duedate": "2026-12-15", "description": "Расхождения по эквайрингу"},
        },
        {"type": "ensure_fields", "key": "$1", "fields": {"assignee": "asmirnova"}},
        {"type": "ensure_link", "key": "$1", "link_type": "Blocks", "direction": "outward", "other_key": "AURORA-9002"},
        {"type": "ensure_sprint", "key": "$1", "sprint": "Спринт 2"},
        {"type": "ensure_comment", "key": "$1", "body": "Создано из чата: сверить выписки за ноябрь."},
        {"type": "ensure_transition", "key": "$1", "status": "In Progress"},
    ]


def commands_of(batch_id: int) -> list[tuple[str, str, dict]]:
    from hub.models import Command

    return [(c.type, c.state, c.result or {}) for c in Command.objects.filter(batch_id=batch_id).order_by("seq")]


def mirrored(key: str):
    from hub.models import MirrorIssue

    return MirrorIssue.objects.filter(key=key).first()


@pytest.fixture
def launcher(platform):
    proc = start_launcher(
        hub_url=platform.hub_url,
        token=platform.sync_token,
        jira_url=platform.emulator.url,
        state_dir=platform.tmp / "syncagent",
        log=platform.tmp / "launcher.log",
    )
    yield proc
    stop(proc)


def first_sync_done(platform) -> None:
    from hub.models import SyncRun

    wait_until(lambda: SyncRun.objects.filter(kind="full", status="ok").exists(), 60, "the first full sync")


def test_batch_lands_in_jira_once_and_a_retry_changes_nothing(platform, launcher):
    first_sync_done(platform)
    demo = mirrored("AURORA-9001")
    assert demo is not None and demo.comments.count() == 7, "the first sync mirrors the emulator's demo project"

    since = platform.emulator.seq()
    batch_id = platform.batch_create("сверка за ноябрь", batch_commands())
    text = platform.batch_wait(batch_id)

    states = commands_of(batch_id)
    assert [s for _t, s, _r in states] == ["done"] * 7, (text, states)
    key = states[0][2]["key"]
    assert states[0][2]["created"] is True
    writes = platform.emulator.writes(since)
    assert sorted(writes) == sorted(
        [
            "POST /rest/api/2/issue",
            f"PUT /rest/api/2/issue/{key}",
            "POST /rest/api/2/issueLink",
            "POST /rest/agile/1.0/sprint/2/issue",
            f"POST /rest/api/2/issue/{key}/comment",
            f"POST /rest/api/2/issue/{key}/transitions",
        ]
    ), writes

    jira = platform.emulator.issue(key)["fields"]
    assert (jira["summary"], jira["status"]["name"], jira["assignee"]["name"]) == (SUMMARY, "In Progress", "asmirnova")
    row = mirrored(key)
    assert row is not None, "the batch's refresh put the new issue in the mirror"
    assert (row.status, row.sprint, row.assignee, row.priority) == ("In Progress", "Спринт 2", "asmirnova", "High")
    assert [(link.link_type, link.direction, link.other_key) for link in row.links.all()] == [
        ("Blocks", "outward", "AURORA-9002")
    ]
    assert [c.body for c in row.comments.all()] == ["Создано из чата: сверить выписки за ноябрь."]

    # The same batch again: everything is already so.
    since = platform.emulator.seq()
    again = platform.batch_create("сверка за ноябрь (повтор)", batch_commands())
    platform.batch_wait(again)
    states = commands_of(again)
    assert [s for _t, s, _r in states] == ["done"] * 7, states
    assert states[0][2]["key"] == key and states[0][2]["created"] is False
    assert all(r.get("changed") == [] for t, _s, r in states if t != "refresh"), states
    assert platform.emulator.writes(since) == []
    assert len(platform.emulator.search(f'project = AURORA AND summary ~ "{SUMMARY}"')) == 1

    # `command_retry` of the done ensure_issue (issue 13): the issue is adopted, Jira is unchanged.
    from hub.models import Command

    ensure = Command.objects.get(batch_id=batch_id, seq=1)
    since = platform.emulator.seq()
    text = platform.mcp("command_retry", {"id": ensure.id})
    retried = int(re.search(r"пакет #(\d+)", text).group(1))
    platform.batch_wait(retried)
    states = commands_of(retried)
    assert [(t, s) for t, s, _r in states] == [("ensure_issue", "done"), ("refresh", "done")], states
    assert states[0][2]["key"] == key and states[0][2]["created"] is False and states[0][2]["changed"] == [], states
    assert platform.emulator.writes(since) == []
    assert len(platform.emulator.search(f'project = AURORA AND summary ~ "{SUMMARY}"')) == 1


def test_lost_create_answer_then_reissue_gives_one_issue(platform, launcher):
    """Jira creates the issue but the answer never arrives: the sync agent finds it by its entity
    property instead of creating another; a new batch with the same ensure_issue adopts it."""
    first_sync_done(platform)
    platform.emulator.faults({"kind": "drop_answer", "method": "POST", "path": r"^/rest/api/2/issue$", "times": 1})
    summary = "Потерянный ответ на создание"
    batch_id = platform.batch_create("lost answer", batch_commands(summary)[:1])
    platform.batch_wait(batch_id)
    states = commands_of(batch_id)
    assert states[0][1] == "done", states
    assert states[0][2]["created"] is True and "свойству" in states[0][2]["message"]

    again = platform.batch_create("lost answer again", batch_commands(summary)[:1])
    platform.batch_wait(again)
    assert commands_of(again)[0][2]["key"] == states[0][2]["key"]
    found = platform.emulator.search(f'project = AURORA AND summary ~ "{summary}"')
    assert [i["key"] for i in found] == [states[0][2]["key"]]
    assert (
        sum(1 for r in platform.emulator.requests() if r["method"] == "POST" and r["path"] == "/rest/api/2/issue") == 1
    )


def test_kill_9_mid_batch_no_duplicate_and_the_batch_completes_after_the_lease(platform, launcher):
    from hub.models import Command

    first_sync_done(platform)
    # The create takes 3 s in Jira: the sync agent is killed while it waits for the answer.
    platform.emulator.faults(
        {"kind": "latency", "method": "POST", "path": r"^/rest/api/2/issue$", "seconds": 3, "times": 1}
    )
    summary = "Задача, пережившая kill -9"
    batch_id = platform.batch_create("kill -9", batch_commands(summary)[:3])
    first = Command.objects.filter(batch_id=batch_id, seq=1)
    wait_until(lambda: first.filter(state="claimed").exists(), 30, "the ensure_issue claimed")
    time.sleep(1.0)
    marker = json.loads((platform.tmp / "syncagent" / "launcher" / "claimed.json").read_text())
    os.kill(marker["pid"], signal.SIGKILL)

    text = platform.batch_wait(batch_id, minutes=2)
    states = commands_of(batch_id)
    assert [s for _t, s, _r in states] == ["done"] * 4, (text, states)
    assert first.get().claims == 2, "re-issued once after the lease expired"
    # «-9» is Lucene's NOT in Jira's text search: find by a plain word, then compare exactly
    found = [
        issue
        for issue in platform.emulator.search('project = AURORA AND summary ~ "пережившая"')
        if issue["fields"]["summary"] == summary
    ]
    assert len(found) == 1, found
    assert states[0][2]["key"] == found[0]["key"]
    assert (
        sum(1 for r in platform.emulator.requests() if r["method"] == "POST" and r["path"] == "/rest/api/2/issue") == 1
    )


def test_planted_issues_cannot_steer_the_withheld_hint(platform, launcher):
    """Security round two, finding 1, through the real path: a hub user's two ensure_issue batches
    (MCP → sync agent → Jira → mirror → Knowledge Store) repeat guessed words, four of them in a
    finance-only document; a user of group it then searches each word over REST. The hint used to
    light up for the four present words only; now every word gets the same answer."""
    import httpx

    from achilles.services import api_token_create
    from hub.knowledge_feed import mirror_to_knowledge
    from hub.models import MirrorIssue
    from tests.achilles.factories import UserFactory
    from tests.hub.conftest import PLANTING_ABSENT, PLANTING_PRESENT, finance_report_write

    present, absent = PLANTING_PRESENT, PLANTING_ABSENT
    finance_report_write()
    first_sync_done(platform)
    keys = []
    for n in range(2):
        command = batch_commands(f"Заметки по клиентам {n}")[0]
        command["fields"] = {"description": " ".join(present + absent)}
        batch_id = platform.batch_create(f"заметки {n}", [command])
        platform.batch_wait(batch_id)
        keys.append(commands_of(batch_id)[0][2]["key"])
    # what the worker does with the mirror's upload (the feed task)
    ids = list(MirrorIssue.objects.filter(key__in=keys).values_list("id", flat=True))
    assert mirror_to_knowledge(issue_ids=ids) == 2

    eve = UserFactory(username="eve", groups=["it"])
    _, token = api_token_create(user=eve)
    answers = {}
    with httpx.Client(base_url=platform.hub_url, headers={"Authorization": f"Bearer {token}"}) as client:
        for word in present + absent:
            found = client.post("/api/knowledge/search", json={"query": word})
            assert found.status_code == 200, found.text
            body = found.json()
            answers[word] = tuple(sorted(w["source_system"] for w in body["withheld"]))
            if word in absent:  # the planted issues are there, readable by eve
                assert any(c["title"].startswith(tuple(keys)) for c in body["candidates"]), body
    assert set(answers.values()) == {()}, answers
