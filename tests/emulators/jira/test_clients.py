"""Scripted sessions of the two well-known Python Jira clients against the emulator: pycontribs ``jira``
and ``atlassian-python-api`` 4.0.7 doing ordinary Jira Server/DC work (projects, create and bulk
create, edit with ``update`` verbs, assignee, comments, worklog, watchers, properties, transitions with
a resolution and a comment, JQL with ``currentUser()`` / ``openSprints()`` / ``ORDER BY``, delete).
Every call goes over HTTP to an in-process emulator; nothing is stubbed (unit: no database)."""

from __future__ import annotations

import pytest
import requests
from atlassian import Jira
from jira import JIRA, JIRAError

from emulators.jira import build_store, start_in_thread


@pytest.fixture
def emu():
    server = start_in_thread(build_store(data="demo", sync_token="sync-pat"))
    yield server
    server.shutdown()
    server.server_close()


def test_a_pycontribs_jira_session(emu):
    store = emu.store
    # given jdoe's personal access token
    j = JIRA(server=emu.url, token_auth="jdoe-pat")
    assert j.myself()["name"] == "jdoe"

    # projects: create_issue(project="AURORA") reads /project/AURORA for its id
    assert "AURORA" in {p.key for p in j.projects()}
    assert j.project("AURORA").name
    issue = j.create_issue(project="AURORA", summary="Клиент: pycontribs", issuetype={"name": "Task"}, labels=["x"])
    assert issue.fields.project.key == "AURORA" and issue.fields.reporter.name == "jdoe"
    by_name = j.create_issue(project="AURORA", summary="Тип по имени", issuetype="Bug")
    assert by_name.fields.issuetype.name == "Bug"

    # bulk create: one good, one refused, each answered on its own
    results = j.create_issues(
        [
            {"project": {"key": "AURORA"}, "summary": "Пакет 1", "issuetype": {"name": "Story"}},
            {"project": {"key": "AURORA"}, "summary": "Пакет 2", "issuetype": {"name": "Nope"}},
        ]
    )
    assert [r["status"] for r in results] == ["Success", "Error"]
    assert results[1]["error"] == {"issuetype": "valid issue type is required"}

    # edit: fields and update verbs
    issue.update(fields={"summary": "Клиент: pycontribs (правка)"}, update={"labels": [{"add": "y"}, {"remove": "x"}]})
    issue = j.issue(issue.key)
    assert issue.fields.summary == "Клиент: pycontribs (правка)" and issue.fields.labels == ["y"]

    # users and assignee
    assert [u.name for u in j.search_users(user="pivan")] == ["pivanov"]
    assert j.user("asmirnova").displayName == "Анна Смирнова"
    j.assign_issue(issue.key, "asmirnova")
    assert j.issue(issue.key).fields.assignee.name == "asmirnova"
    with pytest.raises(JIRAError, match="No matching user"):  # the client looks the user up first
        j.assign_issue(issue.key, "nobody")
    refused = requests.put(
        f"{emu.url}/rest/api/2/issue/{issue.key}/assignee",
        json={"name": "nobody"},
        headers={"Authorization": "Bearer jdoe-pat"},
        timeout=10,
    )
    assert refused.status_code == 400 and refused.json()["errors"] == {"assignee": "User 'nobody' does not exist."}

    # comments: add, edit, read, delete
    comment = j.add_comment(issue.key, "первый")
    comment.update(body="первый (исправлено)")
    assert j.comment(issue.key, comment.id).body == "первый (исправлено)"
    comment.delete()
    assert j.comments(issue.key) == []

    # worklog
    j.add_worklog(issue.key, timeSpent="1h 30m", comment="разбор")
    [worklog] = j.worklogs(issue.key)
    assert worklog.timeSpentSeconds == 5400 and worklog.timeSpent == "1h 30m" and worklog.author.name == "jdoe"

    # watchers (the reporter watches from the start)
    j.add_watcher(issue.key, "pivanov")
    assert {w.name for w in j.watchers(issue.key).watchers} == {"jdoe", "pivanov"}
    j.remove_watcher(issue.key, "jdoe")
    assert j.watchers(issue.key).watchCount == 1

    # entity properties
    j.add_issue_property(issue.key, "review", {"by": "jdoe"})
    assert j.issue_property(issue.key, "review").value.by == "jdoe"
    assert [p.key for p in j.issue_properties(issue.key)] == ["review"]

    # a transition with a resolution on its screen and a comment: both applied
    j.transition_issue(issue.key, "Close", fields={"resolution": {"name": "Won't Fix"}}, comment="не будем")
    closed = j.issue(issue.key)
    assert closed.fields.status.name == "Done" and closed.fields.resolution.name == "Won't Fix"
    assert [c.body for c in j.comments(issue.key)] == ["не будем"]
    # a field off the transition's screen is refused, not dropped
    with pytest.raises(JIRAError) as off_screen:
        j.transition_issue(issue.key, "Reopen", fields={"resolution": {"name": "Done"}})
    assert off_screen.value.status_code == 400 and "not on the appropriate screen" in off_screen.value.text
    j.transition_issue(issue.key, "Reopen")
    assert j.issue(issue.key).fields.resolution is None

    # JQL: currentUser(), openSprints(), ORDER BY priority
    mine = j.search_issues("reporter = currentUser() AND summary ~ Клиент", fields="summary")
    assert [i.key for i in mine] == [issue.key]
    in_sprint = j.search_issues("project = AURORA AND sprint in openSprints()", maxResults=200, fields="summary")
    expected = {k for k, i in store.issues.items() if store.current_sprint(i) and i["project"] == "AURORA"}
    assert {i.key for i in in_sprint} == expected and expected
    by_priority = j.search_issues("project = AURORA ORDER BY priority DESC, key ASC", maxResults=300, fields="priority")
    ranks = [["Highest", "High", "Medium", "Low", "Lowest"].index(i.fields.priority.name) for i in by_priority]
    assert ranks == sorted(ranks)

    # delete
    j.issue(by_name.key).delete()
    with pytest.raises(JIRAError) as gone:
        j.issue(by_name.key)
    assert gone.value.status_code == 404


def test_an_atlassian_python_api_session(emu):
    store = emu.store
    jira = Jira(url=emu.url, token="pivanov-pat", cloud=False)
    assert jira.myself()["name"] == "pivanov"

    assert "AURORA" in {p["key"] for p in jira.projects()}
    project = jira.project("AURORA")
    assert {t["name"] for t in project["issueTypes"]} >= {"Task", "Bug"}

    created = jira.issue_create(
        fields={"project": {"key": "AURORA"}, "summary": "Клиент: atlassian", "issuetype": {"name": "Task"}}
    )
    key = created["key"]
    bulk = jira.create_issues(
        [
            {"fields": {"project": {"key": "AURORA"}, "summary": f"Пакет {n}", "issuetype": {"name": "Task"}}}
            for n in (1, 2)
        ]
    )
    assert len(bulk["issues"]) == 2 and bulk["errors"] == []

    # edit with update verbs (edit_issue sends {"update": …}) and with fields
    jira.edit_issue(key, {"labels": [{"add": "clients"}], "summary": [{"set": "Клиент: atlassian (правка)"}]})
    jira.issue_update(key, fields={"priority": {"name": "High"}}, update={"components": [{"add": {"name": "api"}}]})
    fields = jira.get_issue(key, fields="summary,labels,priority,components")["fields"]
    assert fields["summary"] == "Клиент: atlassian (правка)" and fields["labels"] == ["clients"]
    assert fields["priority"]["name"] == "High" and [c["name"] for c in fields["components"]] == ["api"]
    assert set(fields) == {"summary", "labels", "priority", "components"}

    # a repeated query parameter: every `fields=` counts, as in Jira
    raw = requests.get(
        f"{emu.url}/rest/api/2/issue/{key}",
        params=[("fields", "summary"), ("fields", "status,priority")],
        headers={"Authorization": "Bearer pivanov-pat"},
        timeout=10,
    ).json()
    assert set(raw["fields"]) == {"summary", "status", "priority"}

    # users and assignee
    assert jira.user("jdoe")["displayName"] == "John Doe"
    assert [u["name"] for u in jira.user_find_by_user_string(username="анна")] == ["asmirnova"]
    jira.assign_issue(key, "pivanov")
    assert jira.get_issue(key, fields="assignee")["fields"]["assignee"]["name"] == "pivanov"

    # comments: add, edit
    comment = jira.issue_add_comment(key, "черновик")
    jira.issue_edit_comment(key, comment["id"], "итог")
    assert [c["body"] for c in jira.issue_get_comments(key)["comments"]] == ["итог"]

    # worklog in seconds
    jira.issue_worklog(key, "2026-12-04T10:00:00.000+0000", 3600, comment="созвон")
    logs = jira.issue_get_worklog(key)["worklogs"]
    assert [(w["timeSpentSeconds"], w["started"]) for w in logs] == [(3600, "2026-12-04T10:00:00.000+0000")]

    # watchers
    jira.issue_add_watcher(key, "asmirnova")
    assert {w["name"] for w in jira.issue_get_watchers(key)["watchers"]} == {"pivanov", "asmirnova"}
    jira.issue_delete_watcher(key, "pivanov")
    assert [w["name"] for w in jira.issue_get_watchers(key)["watchers"]] == ["asmirnova"]

    # properties
    jira.set_issue_property(key, "sync", {"n": 1})
    assert jira.get_issue_property(key, "sync")["value"] == {"n": 1}
    jira.delete_issue_property(key, "sync")
    assert jira.get_issue_property_keys(key)["keys"] == []

    # a transition by target status with a resolution and a comment: both land
    jira.set_issue_status(
        key, "Done", fields={"resolution": {"name": "Fixed"}}, update={"comment": [{"add": {"body": "готово"}}]}
    )
    done = jira.get_issue(key, fields="status,resolution,comment")["fields"]
    assert done["status"]["name"] == "Done" and done["resolution"]["name"] == "Fixed"
    assert [c["body"] for c in done["comment"]["comments"]] == ["итог", "готово"]
    assert store.issues[key]["changelog"][-1]["items"][0]["field"] == "status"

    # JQL
    mine = jira.jql("assignee = currentUser() AND resolution = Fixed", fields="summary")
    assert [i["key"] for i in mine["issues"]] == [key]
    newest_first = jira.jql("project = AURORA ORDER BY created DESC", fields="created", limit=3)["issues"]
    assert newest_first[0]["key"] == bulk["issues"][-1]["key"]

    # delete
    jira.delete_issue(bulk["issues"][0]["key"])
    assert bulk["issues"][0]["key"] not in store.issues
