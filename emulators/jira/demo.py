"""Load the emulator with data: the demo project AURORA, or N synthetic issues for the bench.

The demo project is the hub's demo data, ``emulators/jira/dataset.py`` (``AURORA-9001`` … ``AURORA-9030``, links,
the sprints «Спринт 1» / «Спринт 2», comments; ``AURORA-9001`` has 7 comments, the newest 500
characters long), so the sync agent's first sync of a fresh ``make run`` changes nothing a user sees.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from emulators.jira import dataset
from emulators.jira.store import SYNC_USER, UTC, Store

BASE_LABEL = "AWPCA"


def _dataset() -> dict[str, Any]:
    """The hub's demo dataset (``emulators/jira/dataset.py``, plain data in the upload shape) as the emulator seeds it."""
    issues, comments, links, people = [], {}, [], set()
    for item in dataset.demo_issues():
        updated = jira_updated(item["updated"])
        issues.append(
            {
                "key": item["key"],
                "summary": item["summary"],
                "issue_type": item["issue_type"] or "Task",
                "status": item["status"],
                "priority": item["priority"],
                "assignee": item["assignee"],
                "reporter": "jdoe",
                "duedate": item["duedate"],
                "labels": list(item["labels"]),
                "description": (item.get("fields") or {}).get("description"),
                "sprint": item.get("sprint"),
                "created": updated - dt.timedelta(days=20),
                "updated": updated,
            }
        )
        people.update(p for p in [item["assignee"]] if p)
        comments[item["key"]] = [
            {"id": c["id"], "author": c["author"], "body": c["body"], "created": jira_updated(c["created"])}
            for c in item["comments"]
        ]
        people.update(c["author"] for c in item["comments"])
        # Each link is listed on both sides; Jira stores it once (source → target).
        links += [
            (link["link_type"], item["key"], link["other_key"])
            for link in item["links"]
            if link["direction"] == "outward"
        ]
    sprints = [
        {
            "id": 1,
            "name": dataset.SPRINTS[0],
            "state": "active",
            "start": "2026-11-16T09:00:00.000Z",
            "end": "2026-11-30T09:00:00.000Z",
        },
        {"id": 2, "name": dataset.SPRINTS[1], "state": "future", "start": None, "end": None},
    ]
    return {
        "project": {"key": dataset.PROJECT, "name": "Аврора"},
        "issues": issues,
        "comments": comments,
        "links": links,
        "sprints": sprints,
        "people": sorted(people),
    }


def jira_updated(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")


def _base(store: Store, *, sync_token: str) -> None:
    store.add_user(SYNC_USER, "Achilles Sync", token=sync_token)
    store.add_user("jdoe", "John Doe", token="jdoe-pat")
    store.add_user("asmirnova", "Анна Смирнова", token="asmirnova-pat")
    store.add_user("pivanov", "Пётр Иванов", token="pivanov-pat")
    store.add_user("admin", "Jira Admin", token="admin-pat")
    store.add_project("LEGACY", "Архив (только чтение)", components=("api",), read_only=True)


def load_demo(store: Store, *, sync_token: str) -> None:
    data = _dataset()
    _base(store, sync_token=sync_token)
    for person in data["people"]:
        if person not in store.users:
            store.add_user(person, person.replace(".", " ").title())
    project = data["project"]
    store.add_project(project["key"], project["name"], components=("api", "ui", "backend", "infra"))
    store.add_board(1, f"{project['key']} board", project["key"])
    by_name = {}
    for s in data["sprints"]:
        store.add_sprint(s["id"], s["name"], 1, s["state"], start=s.get("start"), end=s.get("end"))
        by_name[s["name"]] = s["id"]
    for i in data["issues"]:
        store.seed_issue(
            key=i["key"],
            summary=i["summary"],
            issue_type=i["issue_type"],
            status=i["status"],
            priority=i["priority"],
            assignee=i["assignee"],
            reporter=i.get("reporter", "jdoe"),
            duedate=i["duedate"],
            labels=i["labels"],
            description=i["description"],
            components=i.get("components"),
            sprint_ids=[by_name[i["sprint"]]] if i.get("sprint") else [],
            created=i["created"],
            updated=i["updated"],
        )
    for key, cs in data["comments"].items():
        for c in cs:
            store.seed_comment(key, author=c["author"], body=c["body"], created=c["created"], comment_id=c["id"])
    for link_type, source, dest in data["links"]:
        store.seed_link(link_type, source, dest)


def load_bench(store: Store, *, sync_token: str, count: int, project: str = "BENCH") -> None:
    """``count`` issues in one project with the base label, a comment each and a link per ten."""
    _base(store, sync_token=sync_token)
    store.add_project(project, "Bench", components=("api",))
    store.add_board(1, f"{project} board", project)
    store.add_sprint(1, "Спринт 1", 1, "active")
    base = dt.datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(1, count + 1):
        key = f"{project}-{n}"
        when = base + dt.timedelta(seconds=n)
        store.seed_issue(
            key=key,
            summary=f"Задача {n}: проверка производительности зеркала",
            status="To Do",
            assignee="jdoe",
            labels=[BASE_LABEL],
            description=f"Описание задачи {n}.",
            sprint_ids=[1] if n % 2 else [],
            created=when,
            updated=when,
        )
        store.seed_comment(key, author="jdoe", body=f"Комментарий к задаче {n}.", created=when)
        if n % 10 == 0:
            store.seed_link("Relates", key, f"{project}-{n - 1}")


def build_store(
    *, data: str = "demo", sync_token: str = "sync-pat", count: int = 0, base_url: str = "http://127.0.0.1"
) -> Store:
    store = Store(base_url=base_url)
    if data == "demo":
        load_demo(store, sync_token=sync_token)
    elif data == "bench":
        load_bench(store, sync_token=sync_token, count=count or 1000)
    elif data == "empty":
        _base(store, sync_token=sync_token)
    else:
        raise ValueError(f"unknown data set {data!r} (demo, bench, empty)")
    return store
