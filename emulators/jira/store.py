"""The emulator's state: one Jira Server/Data Center instance in memory.

Everything a test or the sync agent can observe through REST lives here, guarded by one lock:
issues with `updated` timestamps and a changelog, comments, links, entity properties, boards and
sprints, users and their personal access tokens. Responses use the DC REST v2 shapes (the sprint
custom field as greenhopper's ``Sprint@…[…]`` string, ``issuelinks`` from the viewed issue's side).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import threading
import time
from typing import Any

from emulators.jira import jql as jqlmod

UTC = dt.UTC
SPRINT_FIELD = "customfield_10020"
TEAM_FIELD = "customfield_10010"
POINTS_FIELD = "customfield_10030"
SYNC_USER = "achilles-sync"

STATUSES = {
    "To Do": {"id": "10000", "category": ("new", "To Do", 2)},
    "In Progress": {"id": "3", "category": ("indeterminate", "In Progress", 4)},
    "In Review": {"id": "10001", "category": ("indeterminate", "In Progress", 4)},
    "Done": {"id": "10002", "category": ("done", "Done", 3)},
}
# Transition names differ from their targets on purpose: a client must choose by `to`, not by name.
WORKFLOW = {
    "To Do": [("11", "Start Progress", "In Progress"), ("31", "Close", "Done")],
    "In Progress": [("21", "Stop Progress", "To Do"), ("41", "Send to Review", "In Review"), ("31", "Close", "Done")],
    "In Review": [("51", "Rework", "In Progress"), ("61", "Approve", "Done")],
    "Done": [("71", "Reopen", "To Do")],
}
PRIORITIES = {"Highest": "1", "High": "2", "Medium": "3", "Low": "4", "Lowest": "5"}
RESOLUTIONS = {
    "Fixed": "1",
    "Won't Fix": "2",
    "Duplicate": "3",
    "Incomplete": "4",
    "Cannot Reproduce": "5",
    "Done": "10000",
}
# Transition screens: the fields a transition takes in `fields` / `update` (a field off the screen is Jira's
# 400, never dropped). The transitions into Done show the resolve screen; the others have none. A comment
# (and a worklog) may accompany any transition, as in Jira.
TRANSITION_SCREENS = {"31": {"resolution", "assignee"}, "61": {"resolution", "assignee"}}
TRANSITION_ALWAYS = {"comment", "worklog"}
# Jira's default time tracking: 1d = 8h, 1w = 5d.
_DURATION_UNITS = {"w": 5 * 8 * 3600, "d": 8 * 3600, "h": 3600, "m": 60}
ISSUE_TYPES = {"Epic": "10000", "Story": "10001", "Task": "10002", "Bug": "10004"}
LINK_TYPES = {
    "Blocks": {"id": "10000", "inward": "is blocked by", "outward": "blocks"},
    "Relates": {"id": "10003", "inward": "relates to", "outward": "relates to"},
    "Duplicate": {"id": "10002", "inward": "is duplicated by", "outward": "duplicates"},
    "Cloners": {"id": "10001", "inward": "is cloned by", "outward": "clones"},
}
CUSTOM_FIELDS = {
    SPRINT_FIELD: {
        "name": "Sprint",
        "schema": {
            "type": "array",
            "items": "string",
            "custom": "com.pyxis.greenhopper.jira:gh-sprint",
            "customId": 10020,
        },
    },
    TEAM_FIELD: {
        "name": "Team",
        "schema": {
            "type": "string",
            "custom": "com.atlassian.jira.plugin.system.customfieldtypes:textfield",
            "customId": 10010,
        },
    },
    POINTS_FIELD: {
        "name": "Story Points",
        "schema": {
            "type": "number",
            "custom": "com.atlassian.jira.plugin.system.customfieldtypes:float",
            "customId": 10030,
        },
    },
}
SYSTEM_FIELDS = [
    "summary",
    "description",
    "status",
    "issuetype",
    "priority",
    "assignee",
    "reporter",
    "creator",
    "duedate",
    "labels",
    "components",
    "project",
    "created",
    "updated",
    "issuelinks",
    "comment",
]
EDITABLE = {
    "summary",
    "description",
    "priority",
    "assignee",
    "duedate",
    "labels",
    "components",
    TEAM_FIELD,
    POINTS_FIELD,
    SPRINT_FIELD,
}


class JiraHttpError(Exception):
    """An answer Jira gives as an error: status plus its `errorMessages` / `errors` body."""

    def __init__(self, status: int, messages: list[str] | None = None, errors: dict[str, str] | None = None):
        super().__init__(f"{status}: {messages or errors}")
        self.status = status
        self.body = {"errorMessages": messages or [], "errors": errors or {}}


def jira_time(when: dt.datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}+0000"


class Store:
    """One Jira instance. Public methods take the acting username and return JSON-ready dicts."""

    def __init__(self, *, base_url: str = "http://127.0.0.1"):
        self.lock = threading.RLock()
        self.base_url = base_url
        self.issues: dict[str, dict[str, Any]] = {}
        self.issue_order: list[str] = []
        self.links: dict[int, dict[str, Any]] = {}
        self.links_by_key: dict[str, list[int]] = {}
        self.projects: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, str] = {}
        self.boards: dict[int, dict[str, Any]] = {}
        self.sprints: dict[int, dict[str, Any]] = {}
        self.generation = 0
        self.search_lag_seconds = 0.0
        self._ids = itertools.count(10000)
        self._comment_ids = itertools.count(20000)
        self._link_ids = itertools.count(30000)
        self._history_ids = itertools.count(40000)
        self._worklog_ids = itertools.count(50000)
        self._last_time = dt.datetime.now(UTC)
        self._search_cache: dict[tuple[str, str, int], tuple[float, list[str]]] = {}

    # ---- set-up -------------------------------------------------------------------------------
    def add_user(self, name: str, display: str, *, token: str | None = None) -> None:
        self.users[name] = {
            "name": name,
            "key": name,
            "displayName": display,
            "emailAddress": f"{name}@example.com",
            "active": True,
            "timeZone": "UTC",
        }
        if token:
            self.tokens[token] = name

    def add_project(
        self, key: str, name: str, *, next_number: int = 1, components: tuple[str, ...] = (), read_only: bool = False
    ) -> None:
        self.projects[key] = {
            "key": key,
            "id": str(10100 + len(self.projects)),
            "name": name,
            "next": next_number,
            "components": list(components),
            "read_only": read_only,
        }

    def add_board(self, board_id: int, name: str, project: str) -> None:
        self.boards[board_id] = {"id": board_id, "name": name, "type": "scrum", "project": project}

    def add_sprint(
        self,
        sprint_id: int,
        name: str,
        board_id: int,
        state: str,
        *,
        start: str | None = None,
        end: str | None = None,
        goal: str | None = None,
    ) -> None:
        self.sprints[sprint_id] = {
            "id": sprint_id,
            "name": name,
            "state": state,
            "originBoardId": board_id,
            "startDate": start,
            "endDate": end,
            "goal": goal,
            "sequence": sprint_id,
        }

    def now(self) -> dt.datetime:
        """A strictly increasing clock (two writes in the same millisecond still order)."""
        now = dt.datetime.now(UTC).replace(microsecond=dt.datetime.now(UTC).microsecond // 1000 * 1000)
        if now <= self._last_time:
            now = self._last_time + dt.timedelta(milliseconds=1)
        self._last_time = now
        return now

    def seed_issue(
        self,
        *,
        key: str,
        summary: str,
        issue_type: str = "Task",
        status: str = "To Do",
        priority: str = "Medium",
        assignee: str | None = None,
        reporter: str = "jdoe",
        duedate: str | None = None,
        labels: list[str] | None = None,
        description: str | None = None,
        components: list[str] | None = None,
        sprint_ids: list[int] | None = None,
        custom: dict[str, Any] | None = None,
        created: dt.datetime | None = None,
        updated: dt.datetime | None = None,
        creator: str | None = None,
    ) -> dict[str, Any]:
        """Put an issue in place as it already exists (no changelog, no validation): demo and bench data."""
        project = key.rsplit("-", 1)[0]
        number = int(key.rsplit("-", 1)[1])
        proj = self.projects[project]
        proj["next"] = max(proj["next"], number + 1)
        created = created or self.now()
        issue = {
            "id": str(next(self._ids)),
            "key": key,
            "project": project,
            "summary": summary,
            "description": description,
            "status": status,
            "issuetype": issue_type,
            "priority": priority,
            "assignee": assignee,
            "reporter": reporter,
            "creator": creator or reporter,
            "duedate": duedate,
            "labels": list(labels or []),
            "components": list(components or []),
            "sprint_ids": list(sprint_ids or []),
            "custom": dict(custom or {}),
            "created": created,
            "updated": updated or created,
            "properties": {},
            "comments": [],
            "changelog": [],
            "resolution": "Done" if status == "Done" else None,
            "resolutiondate": (updated or created) if status == "Done" else None,
            "watchers": [reporter],  # Jira's default notification scheme: the reporter watches
            "worklogs": [],
        }
        self.issues[key] = issue
        self.issue_order.append(key)
        self.generation += 1
        return issue

    def seed_comment(
        self, key: str, *, author: str, body: str, created: dt.datetime, comment_id: str | None = None
    ) -> None:
        self.issues[key]["comments"].append(
            {
                "id": comment_id or str(next(self._comment_ids)),
                "author": author,
                "body": body,
                "created": created,
                "updated": created,
            }
        )

    def seed_link(self, link_type: str, source: str, dest: str) -> int:
        link_id = next(self._link_ids)
        self.links[link_id] = {"id": link_id, "type": link_type, "source": source, "dest": dest}
        for k in {source, dest}:
            self.links_by_key.setdefault(k, []).append(link_id)
        self.generation += 1
        return link_id

    # ---- helpers ------------------------------------------------------------------------------
    def user_json(self, name: str | None) -> dict[str, Any] | None:
        if name is None:
            return None
        user = self.users.get(name) or {
            "name": name,
            "key": name,
            "displayName": name,
            "emailAddress": "",
            "active": False,
        }
        return {"self": f"{self.base_url}/rest/api/2/user?username={name}", **user}

    def _issue(self, key: str) -> dict[str, Any]:
        issue = self.issues.get(key.upper())
        if issue is None:
            # Jira also accepts the numeric id
            for candidate in self.issues.values():
                if candidate["id"] == key:
                    return candidate
            raise JiraHttpError(404, ["Issue Does Not Exist"])
        return issue

    def _check_write(self, issue_or_project: str, user: str) -> None:
        proj = self.projects.get(issue_or_project)
        if proj and proj["read_only"] and user != "admin":
            raise JiraHttpError(403, ["You do not have permission to edit issues in this project."])

    def sprint_string(self, sprint: dict[str, Any]) -> str:
        def v(x: Any) -> str:
            return "<null>" if x is None else str(x)

        return (
            f"com.atlassian.greenhopper.service.sprint.Sprint@{sprint['id'] * 7919:x}[id={sprint['id']},"
            f"rapidViewId={sprint['originBoardId']},state={sprint['state'].upper()},name={sprint['name']},"
            f"startDate={v(sprint['startDate'])},endDate={v(sprint['endDate'])},completeDate=<null>,"
            f"activatedDate={v(sprint['startDate'])},sequence={sprint['sequence']},goal={v(sprint['goal'])}]"
        )

    def sprint_json(self, sprint: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": sprint["id"],
            "self": f"{self.base_url}/rest/agile/1.0/sprint/{sprint['id']}",
            "state": sprint["state"],
            "name": sprint["name"],
            "startDate": sprint["startDate"],
            "endDate": sprint["endDate"],
            "originBoardId": sprint["originBoardId"],
            "goal": sprint["goal"],
        }

    def _status_json(self, name: str) -> dict[str, Any]:
        st = STATUSES[name]
        key, cname, cid = st["category"]
        return {
            "self": f"{self.base_url}/rest/api/2/status/{st['id']}",
            "id": st["id"],
            "name": name,
            "statusCategory": {"id": cid, "key": key, "name": cname},
        }

    def _links_of(self, key: str) -> list[dict[str, Any]]:
        out = []
        for link in (self.links[i] for i in self.links_by_key.get(key, ())):
            lt = LINK_TYPES[link["type"]]
            type_json = {"id": lt["id"], "name": link["type"], "inward": lt["inward"], "outward": lt["outward"]}
            if link["source"] == key:
                other, side = link["dest"], "outwardIssue"
            elif link["dest"] == key:
                other, side = link["source"], "inwardIssue"
            else:
                continue
            o = self.issues.get(other)
            brief = {
                "key": other,
                "id": o["id"] if o else "0",
                "fields": {
                    "summary": o["summary"] if o else "",
                    "status": self._status_json(o["status"]) if o else None,
                },
            }
            out.append(
                {
                    "id": str(link["id"]),
                    "self": f"{self.base_url}/rest/api/2/issueLink/{link['id']}",
                    "type": type_json,
                    side: brief,
                }
            )
        return out

    def comment_json(self, issue: dict[str, Any], c: dict[str, Any]) -> dict[str, Any]:
        return {
            "self": f"{self.base_url}/rest/api/2/issue/{issue['id']}/comment/{c['id']}",
            "id": c["id"],
            "author": self.user_json(c["author"]),
            "updateAuthor": self.user_json(c.get("update_author") or c["author"]),
            "body": c["body"],
            "created": jira_time(c["created"]),
            "updated": jira_time(c["updated"]),
        }

    def issue_json(
        self, issue: dict[str, Any], *, fields: str | None = None, expand: str | None = None, user: str | None = None
    ) -> dict[str, Any]:
        wanted: set[str] | None = None
        if fields and fields not in ("*all", "*navigable"):
            wanted = {f.strip() for f in fields.split(",") if f.strip() and not f.strip().startswith("-")}
            wanted -= {"*all", "*navigable"}
            if not wanted:
                wanted = None
        proj = self.projects[issue["project"]]
        all_fields: dict[str, Any] = {
            "summary": issue["summary"],
            "description": issue["description"],
            "status": self._status_json(issue["status"]),
            "issuetype": {"id": ISSUE_TYPES[issue["issuetype"]], "name": issue["issuetype"], "subtask": False},
            "priority": {"id": PRIORITIES[issue["priority"]], "name": issue["priority"]} if issue["priority"] else None,
            "assignee": self.user_json(issue["assignee"]),
            "reporter": self.user_json(issue["reporter"]),
            "creator": self.user_json(issue["creator"]),
            "duedate": issue["duedate"],
            "labels": list(issue["labels"]),
            "components": [
                {"id": str(11000 + proj["components"].index(c)) if c in proj["components"] else "0", "name": c}
                for c in issue["components"]
            ],
            "project": {"id": proj["id"], "key": proj["key"], "name": proj["name"]},
            "resolution": self._resolution_json(issue["resolution"]),
            "resolutiondate": jira_time(issue["resolutiondate"]) if issue["resolutiondate"] else None,
            "watches": {
                "self": f"{self.base_url}/rest/api/2/issue/{issue['key']}/watchers",
                "watchCount": len(issue["watchers"]),
                "isWatching": user in issue["watchers"],
            },
            "worklog": {
                "startAt": 0,
                "maxResults": 20,
                "total": len(issue["worklogs"]),
                "worklogs": [self.worklog_json(issue, w) for w in issue["worklogs"][:20]],
            },
            "timespent": sum(w["seconds"] for w in issue["worklogs"]) or None,
            "created": jira_time(issue["created"]),
            "updated": jira_time(issue["updated"]),
            "issuelinks": self._links_of(issue["key"]),
            "comment": {
                "comments": [self.comment_json(issue, c) for c in issue["comments"]],
                "maxResults": len(issue["comments"]),
                "total": len(issue["comments"]),
                "startAt": 0,
            },
            SPRINT_FIELD: [self.sprint_string(self.sprints[s]) for s in issue["sprint_ids"]] or None,
            TEAM_FIELD: issue["custom"].get(TEAM_FIELD),
            POINTS_FIELD: issue["custom"].get(POINTS_FIELD),
        }
        out_fields = all_fields if wanted is None else {k: v for k, v in all_fields.items() if k in wanted}
        out: dict[str, Any] = {
            "expand": "renderedFields,names,schema,operations,editmeta,changelog,versionedRepresentations",
            "id": issue["id"],
            "self": f"{self.base_url}/rest/api/2/issue/{issue['id']}",
            "key": issue["key"],
            "fields": out_fields,
        }
        if expand and "changelog" in expand:
            hist = [
                {
                    "id": h["id"],
                    "author": self.user_json(h["author"]),
                    "created": jira_time(h["created"]),
                    "items": h["items"],
                }
                for h in issue["changelog"]
            ]
            out["changelog"] = {"startAt": 0, "maxResults": len(hist), "total": len(hist), "histories": hist}
        return out

    def _touch(self, issue: dict[str, Any], user: str, items: list[dict[str, Any]]) -> None:
        issue["updated"] = self.now()
        if items:
            issue["changelog"].append(
                {"id": str(next(self._history_ids)), "author": user, "created": issue["updated"], "items": items}
            )
        self.generation += 1

    @staticmethod
    def _item(field: str, old: Any, new: Any) -> dict[str, Any]:
        def s(x: Any) -> str | None:
            if x is None or x == []:
                return None
            return ", ".join(map(str, x)) if isinstance(x, list) else str(x)

        return {
            "field": field,
            "fieldtype": "custom" if field.startswith("customfield") or field == "Sprint" else "jira",
            "from": s(old),
            "fromString": s(old),
            "to": s(new),
            "toString": s(new),
        }

    # ---- reads --------------------------------------------------------------------------------
    def search(
        self,
        *,
        user: str,
        jql: str,
        start: int,
        max_results: int,
        fields: str | None,
        expand: str | None,
        validate: bool = True,
    ) -> dict[str, Any]:
        with self.lock:
            keys = self._search_keys(jql, user, validate=validate)
            max_results = max(0, min(max_results, 1000))
            page = keys[start : start + max_results]
            return {
                "expand": "schema,names",
                "startAt": start,
                "maxResults": max_results,
                "total": len(keys),
                "issues": [self.issue_json(self.issues[k], fields=fields, expand=expand, user=user) for k in page],
            }

    def _search_keys(self, jql: str, user: str, *, validate: bool = True) -> list[str]:
        cache_key = (jql, user, self.generation)
        hit = self._search_cache.get(cache_key)
        if hit and time.monotonic() - hit[0] < 2 and not self.search_lag_seconds:
            return hit[1]
        query = jqlmod.parse(jql)
        if validate:
            for k in query.keys:
                if k.upper() not in self.issues:
                    raise JiraHttpError(400, [f"An issue with key '{k}' does not exist for field 'key'."])
        hidden_after = (
            dt.datetime.now(UTC) - dt.timedelta(seconds=self.search_lag_seconds) if self.search_lag_seconds else None
        )
        matched = [
            i
            for i in (self.issues[k] for k in self.issue_order)
            if all(c(i, user, self) for c in query.clauses) and (hidden_after is None or i["created"] <= hidden_after)
        ]
        order = query.order or [("key", True)]  # Jira's default ORDER BY key DESC
        for fname, desc in reversed(order):
            # Jira sorts an empty value after every other in ASC (before them in DESC).
            present = [i for i in matched if self._sort_value(i, fname) is not None]
            empty = [i for i in matched if self._sort_value(i, fname) is None]
            present.sort(key=lambda i, f=fname: self._sort_value(i, f), reverse=desc)
            matched = empty + present if desc else present + empty
        keys = [i["key"] for i in matched]
        if len(self._search_cache) > 64:
            self._search_cache.clear()
        self._search_cache[cache_key] = (time.monotonic(), keys)
        return keys

    def get_issue(
        self, key: str, *, fields: str | None = None, expand: str | None = None, user: str | None = None
    ) -> dict[str, Any]:
        with self.lock:
            return self.issue_json(self._issue(key), fields=fields, expand=expand, user=user)

    def _sort_value(self, issue: dict[str, Any], fname: str) -> Any:
        """What ORDER BY ``fname`` compares (None: the field is empty)."""
        if fname == "key":
            return (issue["project"], int(issue["key"].rsplit("-", 1)[1]))
        if fname == "priority":  # by the priority scheme's order: DESC puts Highest first
            return None if issue["priority"] is None else len(PRIORITIES) - list(PRIORITIES).index(issue["priority"])
        if fname == "status":  # by the status order of the instance
            return list(STATUSES).index(issue["status"])
        if fname in ("assignee", "reporter", "creator"):  # by display name
            name = issue[fname]
            return None if name is None else (self.users.get(name, {}).get("displayName") or name).casefold()
        if fname == "sprint":
            current = self.current_sprint(issue)
            return None if current is None else current["sequence"]
        if fname == "components":
            return ", ".join(sorted(issue["components"])).casefold() or None
        if fname == "summary":
            return issue["summary"].casefold()
        if fname == "issuetype":
            return list(ISSUE_TYPES).index(issue["issuetype"])
        if fname == "resolution":
            return None if issue["resolution"] is None else list(RESOLUTIONS).index(issue["resolution"])
        return issue[fname]  # created, updated, resolutiondate, duedate, project

    def get_property(self, key: str, prop: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            if prop not in issue["properties"]:
                raise JiraHttpError(404, [f"Property with key not found: {prop}"])
            return {"key": prop, "value": issue["properties"][prop]}

    def put_property(self, key: str, prop: str, value: Any, *, user: str) -> bool:
        with self.lock:
            issue = self._issue(key)
            self._check_write(issue["project"], user)
            existed = prop in issue["properties"]
            issue["properties"][prop] = value
            return existed

    def comments(self, key: str, *, start: int, max_results: int) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            cs = issue["comments"]
            page = cs[start : start + max_results]
            return {
                "startAt": start,
                "maxResults": max_results,
                "total": len(cs),
                "comments": [self.comment_json(issue, c) for c in page],
            }

    def transitions(self, key: str, *, with_fields: bool = False, transition_id: str | None = None) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            out = []
            for tid, name, to in WORKFLOW[issue["status"]]:
                if transition_id and tid != transition_id:
                    continue
                t: dict[str, Any] = {"id": tid, "name": name, "to": self._status_json(to)}
                if with_fields:  # the transition screen's fields (?expand=transitions.fields)
                    t["fields"] = {
                        f: {
                            "required": False,
                            "name": f.capitalize(),
                            "operations": ["set"],
                            "schema": {"type": "resolution" if f == "resolution" else "user", "system": f},
                        }
                        for f in sorted(TRANSITION_SCREENS.get(tid, ()))
                    }
                out.append(t)
            return {"expand": "transitions", "transitions": out}

    # ---- writes -------------------------------------------------------------------------------
    def _field_value(self, project: dict[str, Any], fname: str, value: Any, errors: dict[str, str]) -> Any:
        """Validate one field of a create/edit body; returns the stored form."""
        if fname == "summary":
            if not isinstance(value, str) or not value.strip():
                errors["summary"] = "You must specify a summary of the issue."
            elif len(value) > 255:
                errors["summary"] = "Summary must be less than 255 characters."
            return value
        if fname == "description":
            if value is not None and not isinstance(value, str):
                errors["description"] = "Operation value must be a string"
            return value
        if fname == "priority":
            name = (value or {}).get("name") if isinstance(value, dict) else None
            if isinstance(value, dict) and "id" in value and not name:
                name = next((n for n, i in PRIORITIES.items() if i == str(value["id"])), None)
            if name not in PRIORITIES:
                errors["priority"] = f"Specify a valid priority name or id, '{name}' is not valid"
            return name
        if fname == "resolution":
            name = value.get("name") if isinstance(value, dict) else None
            if isinstance(value, dict) and "id" in value and not name:
                name = next((n for n, i in RESOLUTIONS.items() if i == str(value["id"])), None)
            if name not in RESOLUTIONS:
                errors["resolution"] = f"Could not find resolution with name '{name}'."
            return name
        if fname == "assignee":
            if value is None:
                return None
            name = value.get("name") if isinstance(value, dict) else None
            if name is None:
                return None
            if name not in self.users:
                errors["assignee"] = f"User '{name}' does not exist."
            return name
        if fname == "duedate":
            if value is None:
                return None
            try:
                dt.date.fromisoformat(str(value))
            except ValueError:
                errors["duedate"] = "Error parsing date string: " + str(value)
            return value
        if fname == "labels":
            if not isinstance(value, list) or any(
                not isinstance(x, str) or not x or re.search(r"\s", x) for x in value
            ):
                errors["labels"] = "The label '…' contains spaces which is invalid."
                return []
            return list(value)
        if fname == "components":
            names = []
            for c in value or []:
                name = c.get("name") if isinstance(c, dict) else None
                if name not in project["components"]:
                    errors["components"] = f"Component name '{name}' is not valid"
                names.append(name)
            return names
        if fname == SPRINT_FIELD:
            if value is None:
                return None
            try:
                sid = int(value)
            except (TypeError, ValueError):
                errors[fname] = "Number value expected as the Sprint id."
                return None
            if sid not in self.sprints:
                errors[fname] = f"Sprint with id {sid} does not exist."
            return sid
        if fname == POINTS_FIELD:
            if value is not None and not isinstance(value, (int, float)):
                errors[fname] = "Operation value must be a number"
            return value
        if fname == TEAM_FIELD:
            if value is not None and not isinstance(value, str):
                errors[fname] = "Operation value must be a string"
            return value
        errors[fname] = f"Field '{fname}' cannot be set. It is not on the appropriate screen, or unknown."
        return None

    def create_issue(self, body: dict[str, Any], *, user: str) -> dict[str, Any]:
        with self.lock:
            fields = body.get("fields")
            if not isinstance(fields, dict):
                raise JiraHttpError(400, ["Issue fields are required."])
            errors: dict[str, str] = {}
            pref = fields.get("project") or {}
            pkey = pref.get("key") if isinstance(pref, dict) else None
            if pkey is None and isinstance(pref, dict) and "id" in pref:
                pkey = next((k for k, p in self.projects.items() if p["id"] == str(pref["id"])), None)
            project = self.projects.get(pkey or "")
            if project is None:
                errors["project"] = "project is required"
            tref = fields.get("issuetype") or {}
            itype = tref.get("name") if isinstance(tref, dict) else None
            if isinstance(tref, dict) and "id" in tref and not itype:
                itype = next((n for n, i in ISSUE_TYPES.items() if i == str(tref["id"])), None)
            if itype not in ISSUE_TYPES:
                errors["issuetype"] = "valid issue type is required"
            values: dict[str, Any] = {}
            for fname, value in fields.items():
                if fname in ("project", "issuetype"):
                    continue
                values[fname] = self._field_value(project or {"components": []}, fname, value, errors)
            if "summary" not in fields:
                errors["summary"] = "You must specify a summary of the issue."
            if errors:
                raise JiraHttpError(400, [], errors)
            self._check_write(project["key"], user)
            properties = body.get("properties") or []
            if not isinstance(properties, list) or any(not isinstance(p, dict) or "key" not in p for p in properties):
                raise JiraHttpError(400, ["properties must be a list of {key, value}"])
            number = project["next"]
            project["next"] += 1
            key = f"{project['key']}-{number}"
            now = self.now()
            sprint = values.pop(SPRINT_FIELD, None)
            issue = self.seed_issue(
                key=key,
                summary=values["summary"],
                issue_type=itype,
                status="To Do",
                priority=values.get("priority") or "Medium",
                assignee=values.get("assignee"),
                reporter=user,
                creator=user,
                duedate=values.get("duedate"),
                labels=values.get("labels") or [],
                description=values.get("description"),
                components=values.get("components") or [],
                sprint_ids=[sprint] if sprint else [],
                custom={k: v for k, v in values.items() if k.startswith("customfield")},
                created=now,
                updated=now,
            )
            for p in properties:
                issue["properties"][p["key"]] = p.get("value")
            return {"id": issue["id"], "key": key, "self": f"{self.base_url}/rest/api/2/issue/{issue['id']}"}

    def edit_issue(self, key: str, body: dict[str, Any], *, user: str) -> None:
        """PUT /issue/{key}: ``fields`` (set) and ``update`` (a list of ``{verb: value}`` per field)."""
        with self.lock:
            issue = self._issue(key)
            fields = body.get("fields") or {}
            update = body.get("update") or {}
            if not isinstance(fields, dict) or not isinstance(update, dict):
                raise JiraHttpError(400, ["Can not deserialize the request: 'fields' and 'update' are objects."])
            if not fields and not update:
                raise JiraHttpError(400, ["Issue fields are required."])
            project = self.projects[issue["project"]]
            errors: dict[str, str] = {}
            values = {f: self._field_value(project, f, v, errors) for f, v in fields.items()}
            extra = self._update_ops(issue, update, fields, values, errors, allowed=None)
            if errors:
                raise JiraHttpError(400, [], errors)
            self._check_write(issue["project"], user)
            items = self._apply_values(issue, values)
            self._apply_extra(issue, extra, user)
            if items or extra:
                self._touch(issue, user, items)

    def _update_ops(
        self,
        issue: dict[str, Any],
        update: dict[str, Any],
        fields: dict[str, Any],
        values: dict[str, Any],
        errors: dict[str, str],
        *,
        allowed: set[str] | None,
    ) -> list[tuple[str, str, Any]]:
        """Fold ``update`` verbs into ``values``; comment / worklog operations come back to apply after."""
        project = self.projects[issue["project"]]
        extra: list[tuple[str, str, Any]] = []
        for fname, ops in update.items():
            if fname in fields:
                errors[fname] = f"Field '{fname}' cannot be set in both 'fields' and 'update'."
                continue
            if allowed is not None and fname not in allowed and fname not in TRANSITION_ALWAYS:
                errors[fname] = f"Field '{fname}' cannot be set. It is not on the appropriate screen, or unknown."
                continue
            if not isinstance(ops, list) or any(not isinstance(op, dict) or len(op) != 1 for op in ops):
                errors[fname] = "Operations must be a list of objects with one verb each."
                continue
            for op in ops:
                ((verb, arg),) = op.items()
                if fname == "comment":
                    self._check_comment_op(issue, verb, arg, errors)
                    extra.append(("comment", verb, arg))
                elif fname == "worklog":
                    if verb != "add":
                        errors["worklog"] = f"Operation '{verb}' is not supported by the 'worklog' field."
                    else:
                        extra.append(("worklog", verb, self._worklog_values(arg, errors)))
                elif fname in ("labels", "components"):
                    current = values.get(fname, list(issue[fname]))
                    if verb == "set":
                        values[fname] = self._field_value(project, fname, arg, errors)
                    elif verb in ("add", "remove"):
                        item = self._field_value(project, fname, [arg], errors)
                        if verb == "add":
                            values[fname] = current + [x for x in item if x not in current]
                        else:
                            values[fname] = [x for x in current if x not in item]
                    else:
                        errors[fname] = f"Operation '{verb}' is not supported by the '{fname}' field."
                elif fname in EDITABLE or fname == "resolution":
                    if verb != "set":
                        errors[fname] = f"Operation '{verb}' is not supported by the '{fname}' field."
                    else:
                        values[fname] = self._field_value(project, fname, arg, errors)
                else:
                    errors[fname] = f"Field '{fname}' cannot be set. It is not on the appropriate screen, or unknown."
        return extra

    def _check_comment_op(self, issue: dict[str, Any], verb: str, arg: Any, errors: dict[str, str]) -> None:
        if verb == "add":
            if not isinstance(arg, dict) or not isinstance(arg.get("body"), str) or not arg["body"].strip():
                errors["comment"] = "Comment body can not be empty!"
        elif verb in ("edit", "remove"):
            cid = str(arg.get("id")) if isinstance(arg, dict) else ""
            if not any(c["id"] == cid for c in issue["comments"]):
                errors["comment"] = f"Can not find a comment for the id: {cid}."
            elif verb == "edit" and (not isinstance(arg.get("body"), str) or not arg["body"].strip()):
                errors["comment"] = "Comment body can not be empty!"
        else:
            errors["comment"] = f"Operation '{verb}' is not supported by the 'comment' field."

    def _apply_values(self, issue: dict[str, Any], values: dict[str, Any]) -> list[dict[str, Any]]:
        items = []
        for fname, new in values.items():
            if fname in ("summary", "description", "priority", "assignee", "duedate", "labels", "components"):
                old = issue[fname]
                if old != new:
                    issue[fname] = new
                    items.append(self._item(fname, old, new))
            elif fname == "resolution":
                if issue["resolution"] != new:
                    items.append(self._item("resolution", issue["resolution"], new))
                    issue["resolution"] = new
            elif fname == SPRINT_FIELD:
                if self._set_sprint(issue, new):
                    items.append(self._item("Sprint", None, self.sprints[new]["name"] if new else None))
            else:
                old = issue["custom"].get(fname)
                if old != new:
                    issue["custom"][fname] = new
                    items.append(self._item(fname, old, new))
        return items

    def _apply_extra(self, issue: dict[str, Any], extra: list[tuple[str, str, Any]], user: str) -> None:
        for fname, verb, arg in extra:
            if fname == "worklog":
                self._add_worklog(issue, arg, user=user)
            elif verb == "add":
                now = self.now()
                issue["comments"].append(
                    {
                        "id": str(next(self._comment_ids)),
                        "author": user,
                        "body": arg["body"],
                        "created": now,
                        "updated": now,
                    }
                )
            elif verb == "edit":
                comment = next(c for c in issue["comments"] if c["id"] == str(arg["id"]))
                comment["body"], comment["updated"], comment["update_author"] = arg["body"], self.now(), user
            else:
                issue["comments"] = [c for c in issue["comments"] if c["id"] != str(arg["id"])]

    def _set_sprint(self, issue: dict[str, Any], sprint_id: int | None) -> bool:
        current = self.current_sprint(issue)
        if current is not None and current["id"] == sprint_id:
            return False
        kept = [s for s in issue["sprint_ids"] if self.sprints[s]["state"] == "closed" and s != sprint_id]
        issue["sprint_ids"] = kept + ([sprint_id] if sprint_id else [])
        return True

    def current_sprint(self, issue: dict[str, Any]) -> dict[str, Any] | None:
        open_ = [self.sprints[s] for s in issue["sprint_ids"] if self.sprints[s]["state"] != "closed"]
        return open_[-1] if open_ else None

    def transition(self, key: str, body: dict[str, Any], *, user: str) -> None:
        """POST /issue/{key}/transitions: the screen's ``fields`` / ``update`` are applied or refused, never dropped."""
        with self.lock:
            issue = self._issue(key)
            tref = body.get("transition") or {}
            tid = str((tref.get("id") if isinstance(tref, dict) else "") or "")
            if not tid:
                raise JiraHttpError(400, ["Missing 'transition' identifier"])
            options = {t[0]: t for t in WORKFLOW[issue["status"]]}
            if tid not in options:
                raise JiraHttpError(400, [f"Transition id '{tid}' is not valid for this issue."])
            fields = body.get("fields") or {}
            update = body.get("update") or {}
            if not isinstance(fields, dict) or not isinstance(update, dict):
                raise JiraHttpError(400, ["Can not deserialize the request: 'fields' and 'update' are objects."])
            screen = TRANSITION_SCREENS.get(tid, set())
            project = self.projects[issue["project"]]
            errors: dict[str, str] = {}
            values: dict[str, Any] = {}
            for fname, value in fields.items():
                if fname not in screen:
                    errors[fname] = f"Field '{fname}' cannot be set. It is not on the appropriate screen, or unknown."
                else:
                    values[fname] = self._field_value(project, fname, value, errors)
            extra = self._update_ops(issue, update, fields, values, errors, allowed=screen)
            if errors:
                raise JiraHttpError(400, [], errors)
            self._check_write(issue["project"], user)
            old = issue["status"]
            issue["status"] = options[tid][2]
            items = [self._item("status", old, issue["status"])]
            if issue["status"] == "Done":
                # the simplified workflow's post function: resolved as Done unless the screen said otherwise
                values.setdefault("resolution", "Done")
                issue["resolutiondate"] = self.now()
            elif old == "Done":
                values["resolution"] = None
                issue["resolutiondate"] = None
            items += self._apply_values(issue, values)
            self._apply_extra(issue, extra, user)
            self._touch(issue, user, items)

    def add_comment(self, key: str, body: dict[str, Any], *, user: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            text = body.get("body")
            if not isinstance(text, str) or not text.strip():
                raise JiraHttpError(400, [], {"comment": "Comment body can not be empty!"})
            self._check_write(issue["project"], user)
            now = self.now()
            c = {"id": str(next(self._comment_ids)), "author": user, "body": text, "created": now, "updated": now}
            issue["comments"].append(c)
            self._touch(issue, user, [])
            return self.comment_json(issue, c)

    def create_link(self, body: dict[str, Any], *, user: str) -> None:
        with self.lock:
            tref = body.get("type") or {}
            name = tref.get("name") if isinstance(tref, dict) else None
            if isinstance(tref, dict) and "id" in tref and not name:
                name = next((n for n, t in LINK_TYPES.items() if t["id"] == str(tref["id"])), None)
            if name not in LINK_TYPES:
                raise JiraHttpError(404, [f"No issue link type with name '{name}' found."])
            try:
                source = self._issue((body.get("inwardIssue") or {}).get("key") or "")
                dest = self._issue((body.get("outwardIssue") or {}).get("key") or "")
            except JiraHttpError:
                raise JiraHttpError(404, ["Issue Does Not Exist"]) from None
            self._check_write(source["project"], user)
            # Jira stores identical duplicates without complaint; readers must check first.
            self.seed_link(name, source["key"], dest["key"])
            lt = LINK_TYPES[name]
            self._touch(source, user, [self._item("Link", None, f"This issue {lt['outward']} {dest['key']}")])
            self._touch(dest, user, [self._item("Link", None, f"This issue {lt['inward']} {source['key']}")])

    def delete_link(self, link_id: int, *, user: str) -> None:
        with self.lock:
            link = self.links.get(link_id)
            if link is None:
                raise JiraHttpError(404, ["No issue link with id exists."])
            self._check_write(self.issues[link["source"]]["project"], user)
            del self.links[link_id]
            for k in {link["source"], link["dest"]}:
                self.links_by_key[k].remove(link_id)
            for k in (link["source"], link["dest"]):
                self._touch(self.issues[k], user, [self._item("Link", k, None)])

    # ---- agile --------------------------------------------------------------------------------
    def boards_for(self, project: str | None) -> dict[str, Any]:
        with self.lock:
            values = [
                {
                    "id": b["id"],
                    "self": f"{self.base_url}/rest/agile/1.0/board/{b['id']}",
                    "name": b["name"],
                    "type": b["type"],
                    "location": {"projectKey": b["project"]},
                }
                for b in self.boards.values()
                if project is None
                or b["project"] == project
                or self.projects.get(b["project"], {}).get("id") == project
            ]
            return {"maxResults": 50, "startAt": 0, "total": len(values), "isLast": True, "values": values}

    def board_sprints(self, board_id: int, states: set[str] | None, start: int, max_results: int) -> dict[str, Any]:
        with self.lock:
            if board_id not in self.boards:
                raise JiraHttpError(404, ["Board does not exist or you do not have permission to see it."])
            values = [
                self.sprint_json(s)
                for s in self.sprints.values()
                if s["originBoardId"] == board_id and (not states or s["state"] in states)
            ]
            page = values[start : start + max_results]
            return {
                "maxResults": max_results,
                "startAt": start,
                "isLast": start + max_results >= len(values),
                "values": page,
            }

    def get_sprint(self, sprint_id: int) -> dict[str, Any]:
        with self.lock:
            if sprint_id not in self.sprints:
                raise JiraHttpError(404, ["Sprint does not exist"])
            return self.sprint_json(self.sprints[sprint_id])

    def move_to_sprint(self, sprint_id: int, body: dict[str, Any], *, user: str) -> None:
        with self.lock:
            sprint = self.sprints.get(sprint_id)
            if sprint is None:
                raise JiraHttpError(404, ["Sprint does not exist"])
            if sprint["state"] == "closed":
                raise JiraHttpError(400, ["Issues can only be moved to open or active sprints."])
            keys = body.get("issues")
            if not isinstance(keys, list) or not keys:
                raise JiraHttpError(400, ["issues: must not be empty"])
            issues = [self._issue(k) for k in keys]
            for issue in issues:
                self._check_write(issue["project"], user)
            for issue in issues:
                before = self.current_sprint(issue)
                if self._set_sprint(issue, sprint_id):
                    self._touch(issue, user, [self._item("Sprint", before["name"] if before else None, sprint["name"])])

    def agile_issue(self, key: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            current = self.current_sprint(issue)
            closed = [
                self.sprint_json(self.sprints[s]) for s in issue["sprint_ids"] if self.sprints[s]["state"] == "closed"
            ]
            return {
                "id": issue["id"],
                "key": issue["key"],
                "self": f"{self.base_url}/rest/agile/1.0/issue/{issue['id']}",
                "fields": {"sprint": self.sprint_json(current) if current else None, "closedSprints": closed},
            }

    # ---- the rest of an ordinary client's surface ---------------------------------------------
    def _resolution_json(self, name: str | None) -> dict[str, Any] | None:
        if name is None:
            return None
        rid = RESOLUTIONS[name]
        return {"self": f"{self.base_url}/rest/api/2/resolution/{rid}", "id": rid, "name": name, "description": ""}

    def project_json(self, proj: dict[str, Any], *, full: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "expand": "description,lead,url,projectKeys",
            "self": f"{self.base_url}/rest/api/2/project/{proj['id']}",
            "id": proj["id"],
            "key": proj["key"],
            "name": proj["name"],
            "avatarUrls": {"48x48": f"{self.base_url}/secure/projectavatar?avatarId=10324"},
            "projectTypeKey": "software",
            "archived": False,
        }
        if full:  # GET /project/{key} carries these whatever `expand` says (DC)
            out.update(
                {
                    "description": "",
                    "lead": self.user_json("admin"),
                    "components": [
                        {"id": str(11000 + n), "name": c, "self": f"{self.base_url}/rest/api/2/component/{11000 + n}"}
                        for n, c in enumerate(proj["components"])
                    ],
                    "issueTypes": self.issue_types(),
                    "assigneeType": "UNASSIGNED",
                    "versions": [],
                    "roles": {},
                }
            )
        return out

    def project_list(self) -> list[dict[str, Any]]:
        with self.lock:
            return [self.project_json(p, full=False) for p in self.projects.values()]

    def _project(self, key_or_id: str) -> dict[str, Any]:
        proj = self.projects.get(key_or_id.upper()) or next(
            (p for p in self.projects.values() if p["id"] == key_or_id), None
        )
        if proj is None:
            raise JiraHttpError(404, [f"No project could be found with key '{key_or_id}'."])
        return proj

    def project_get(self, key_or_id: str) -> dict[str, Any]:
        with self.lock:
            return self.project_json(self._project(key_or_id), full=True)

    def project_components(self, key_or_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return self.project_json(self._project(key_or_id), full=True)["components"]

    def issue_types(self) -> list[dict[str, Any]]:
        return [
            {
                "self": f"{self.base_url}/rest/api/2/issuetype/{tid}",
                "id": tid,
                "name": name,
                "description": "",
                "subtask": False,
                "iconUrl": f"{self.base_url}/images/icons/issuetypes/{name.lower()}.svg",
            }
            for name, tid in ISSUE_TYPES.items()
        ]

    def createmeta_issue_types(self, key_or_id: str, start: int, max_results: int) -> dict[str, Any]:
        with self.lock:
            self._project(key_or_id)
            values = self.issue_types()
            page = values[start : start + max_results]
            return {
                "maxResults": max_results,
                "startAt": start,
                "total": len(values),
                "isLast": start + max_results >= len(values),
                "values": page,
            }

    def priorities(self) -> list[dict[str, Any]]:
        return [
            {"self": f"{self.base_url}/rest/api/2/priority/{pid}", "id": pid, "name": name}
            for name, pid in PRIORITIES.items()
        ]

    def resolutions(self) -> list[dict[str, Any]]:
        return [self._resolution_json(name) for name in RESOLUTIONS]  # type: ignore[misc]

    def statuses(self) -> list[dict[str, Any]]:
        return [self._status_json(name) for name in STATUSES]

    # users
    def user_get(self, username: str | None, key: str | None) -> dict[str, Any]:
        with self.lock:
            name = username or key
            if not name:
                raise JiraHttpError(404, ["The username query parameter was not provided"])
            if name not in self.users:
                raise JiraHttpError(404, [f"The user named '{name}' does not exist"])
            return self.user_json(name)  # type: ignore[return-value]

    def user_search(self, username: str | None, start: int, max_results: int) -> list[dict[str, Any]]:
        """DC's /user/search: ``username`` matched at the start of the name, display name, e-mail ('.' = all)."""
        with self.lock:
            if not username:
                raise JiraHttpError(400, ["The username query parameter was not provided"])
            q = username.casefold()

            def hit(u: dict[str, Any]) -> bool:
                if q == ".":
                    return True
                words = [u["name"], u["emailAddress"], *u["displayName"].split()]
                return any(w.casefold().startswith(q) for w in words) or u["displayName"].casefold().startswith(q)

            found = [self.user_json(n) for n, u in sorted(self.users.items()) if u["active"] and hit(u)]
            return found[start : start + max_results]  # type: ignore[return-value]

    def assign(self, key: str, body: dict[str, Any], *, user: str) -> None:
        """PUT /issue/{key}/assignee ``{"name": …}``: null unassigns, "-1" is the project's default (unassigned here)."""
        with self.lock:
            issue = self._issue(key)
            if not isinstance(body, dict) or "name" not in body:
                raise JiraHttpError(400, [], {"assignee": "Could not find a 'name' for the assignee."})
            name = body["name"]
            if name == "-1":
                name = None
            if name is not None and name not in self.users:
                raise JiraHttpError(400, [], {"assignee": f"User '{name}' does not exist."})
            self._check_write(issue["project"], user)
            if issue["assignee"] != name:
                items = [self._item("assignee", issue["assignee"], name)]
                issue["assignee"] = name
                self._touch(issue, user, items)

    # delete and bulk create
    def delete_issue(self, key: str, *, delete_subtasks: bool, user: str) -> None:
        with self.lock:
            issue = self._issue(key)
            self._check_write(issue["project"], user)
            for link_id in list(self.links_by_key.get(issue["key"], ())):
                link = self.links.pop(link_id)
                for k in {link["source"], link["dest"]}:
                    if link_id in self.links_by_key.get(k, []):
                        self.links_by_key[k].remove(link_id)
            del self.issues[issue["key"]]
            self.issue_order.remove(issue["key"])
            self.generation += 1

    def bulk_create(self, body: dict[str, Any], *, user: str) -> tuple[int, dict[str, Any]]:
        """POST /issue/bulk: each element created or refused on its own; 400 only when none was created."""
        updates = body.get("issueUpdates") if isinstance(body, dict) else None
        if not isinstance(updates, list) or not updates:
            raise JiraHttpError(400, ["Issue updates are required."])
        created, failed = [], []
        for n, element in enumerate(updates):
            try:
                created.append(self.create_issue(element if isinstance(element, dict) else {}, user=user))
            except JiraHttpError as exc:
                failed.append({"status": exc.status, "elementErrors": exc.body, "failedElementNumber": n})
        return (201 if created else 400), {"issues": created, "errors": failed}

    # comments
    def _comment(self, issue: dict[str, Any], comment_id: str) -> dict[str, Any]:
        comment = next((c for c in issue["comments"] if c["id"] == comment_id), None)
        if comment is None:
            raise JiraHttpError(404, [f"Can not find a comment for the id: {comment_id}."])
        return comment

    def comment_get(self, key: str, comment_id: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            return self.comment_json(issue, self._comment(issue, comment_id))

    def comment_edit(self, key: str, comment_id: str, body: dict[str, Any], *, user: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            comment = self._comment(issue, comment_id)
            text = body.get("body") if isinstance(body, dict) else None
            if not isinstance(text, str) or not text.strip():
                raise JiraHttpError(400, [], {"comment": "Comment body can not be empty!"})
            if comment["author"] != user and user != "admin":
                raise JiraHttpError(403, ["You do not have the permission to edit this comment."])
            self._check_write(issue["project"], user)
            comment["body"], comment["updated"], comment["update_author"] = text, self.now(), user
            self._touch(issue, user, [])
            return self.comment_json(issue, comment)

    def comment_delete(self, key: str, comment_id: str, *, user: str) -> None:
        with self.lock:
            issue = self._issue(key)
            comment = self._comment(issue, comment_id)
            if comment["author"] != user and user != "admin":
                raise JiraHttpError(403, ["You do not have the permission to delete this comment."])
            self._check_write(issue["project"], user)
            issue["comments"].remove(comment)
            self._touch(issue, user, [])

    # worklog
    def worklog_json(self, issue: dict[str, Any], w: dict[str, Any]) -> dict[str, Any]:
        return {
            "self": f"{self.base_url}/rest/api/2/issue/{issue['id']}/worklog/{w['id']}",
            "author": self.user_json(w["author"]),
            "updateAuthor": self.user_json(w["author"]),
            "comment": w["comment"],
            "created": jira_time(w["created"]),
            "updated": jira_time(w["updated"]),
            "started": jira_time(w["started"]),
            "timeSpent": _duration_text(w["seconds"]),
            "timeSpentSeconds": w["seconds"],
            "id": w["id"],
            "issueId": issue["id"],
        }

    def _worklog_values(self, body: Any, errors: dict[str, str]) -> dict[str, Any]:
        if not isinstance(body, dict):
            errors["timeLogged"] = "You must indicate the time spent working."
            return {}
        seconds = body.get("timeSpentSeconds")
        if seconds is None and body.get("timeSpent") is not None:
            seconds = _duration_seconds(str(body["timeSpent"]))
            if seconds is None:
                errors["timeLogged"] = "Invalid time duration entered."
        if seconds is None and "timeLogged" not in errors:
            errors["timeLogged"] = "You must indicate the time spent working."
        elif isinstance(seconds, int) and seconds <= 0:
            errors["timeLogged"] = "Time Spent must be greater than zero."
        started = None
        if body.get("started") is not None:
            started = _parse_jira_time(str(body["started"]))
            if started is None:
                errors["started"] = (
                    "Invalid date format. Please enter the date in the format \"yyyy-MM-dd'T'HH:mm:ss.SSSZ\"."
                )
        comment = body.get("comment")
        if comment is not None and not isinstance(comment, str):
            errors["comment"] = "Operation value must be a string"
        return {"seconds": seconds, "started": started, "comment": comment or ""}

    def _add_worklog(self, issue: dict[str, Any], values: dict[str, Any], *, user: str) -> dict[str, Any]:
        now = self.now()
        w = {
            "id": str(next(self._worklog_ids)),
            "author": user,
            "comment": values["comment"],
            "created": now,
            "updated": now,
            "started": values["started"] or now,
            "seconds": int(values["seconds"]),
        }
        issue["worklogs"].append(w)
        return w

    def worklogs(self, key: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            ws = [self.worklog_json(issue, w) for w in issue["worklogs"]]
            return {"startAt": 0, "maxResults": len(ws), "total": len(ws), "worklogs": ws}

    def _worklog(self, issue: dict[str, Any], worklog_id: str) -> dict[str, Any]:
        w = next((w for w in issue["worklogs"] if w["id"] == worklog_id), None)
        if w is None:
            raise JiraHttpError(404, [f"Cannot find worklog with id: '{worklog_id}'."])
        return w

    def worklog_add(self, key: str, body: Any, *, user: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            errors: dict[str, str] = {}
            values = self._worklog_values(body, errors)
            if errors:
                raise JiraHttpError(400, [], errors)
            self._check_write(issue["project"], user)
            w = self._add_worklog(issue, values, user=user)
            self._touch(issue, user, [self._item("timespent", None, w["seconds"])])
            return self.worklog_json(issue, w)

    def worklog_get(self, key: str, worklog_id: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            return self.worklog_json(issue, self._worklog(issue, worklog_id))

    def worklog_edit(self, key: str, worklog_id: str, body: Any, *, user: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            w = self._worklog(issue, worklog_id)
            merged = {"timeSpentSeconds": w["seconds"], "comment": w["comment"]}
            merged.update(body if isinstance(body, dict) else {})
            if isinstance(body, dict) and "timeSpent" in body and "timeSpentSeconds" not in body:
                merged.pop("timeSpentSeconds")
            errors: dict[str, str] = {}
            values = self._worklog_values(merged, errors)
            if errors:
                raise JiraHttpError(400, [], errors)
            self._check_write(issue["project"], user)
            w.update(seconds=int(values["seconds"]), comment=values["comment"], updated=self.now())
            if values["started"]:
                w["started"] = values["started"]
            self._touch(issue, user, [])
            return self.worklog_json(issue, w)

    def worklog_delete(self, key: str, worklog_id: str, *, user: str) -> None:
        with self.lock:
            issue = self._issue(key)
            w = self._worklog(issue, worklog_id)
            self._check_write(issue["project"], user)
            issue["worklogs"].remove(w)
            self._touch(issue, user, [])

    # watchers
    def watchers(self, key: str, *, user: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            return {
                "self": f"{self.base_url}/rest/api/2/issue/{issue['key']}/watchers",
                "isWatching": user in issue["watchers"],
                "watchCount": len(issue["watchers"]),
                "watchers": [self.user_json(n) for n in issue["watchers"]],
            }

    def watcher_add(self, key: str, name: Any, *, user: str) -> None:
        """POST /issue/{key}/watchers with a JSON string body (the username); an empty body: the caller."""
        with self.lock:
            issue = self._issue(key)
            if name in (None, {}, ""):
                name = user
            if not isinstance(name, str):
                raise JiraHttpError(400, ["The body must be the user name as a JSON string."])
            if name not in self.users:
                raise JiraHttpError(404, [f'The user "{name}" does not exist.'])
            if name not in issue["watchers"]:
                issue["watchers"].append(name)

    def watcher_remove(self, key: str, name: str | None, *, user: str) -> None:
        with self.lock:
            issue = self._issue(key)
            if not name:
                raise JiraHttpError(400, ["The username query parameter was not provided"])
            if name not in self.users:
                raise JiraHttpError(404, [f'The user "{name}" does not exist.'])
            if name != user and user != "admin":
                raise JiraHttpError(403, ["You do not have the permission to manage the watcher list."])
            if name in issue["watchers"]:
                issue["watchers"].remove(name)

    # entity properties
    def property_keys(self, key: str) -> dict[str, Any]:
        with self.lock:
            issue = self._issue(key)
            return {
                "keys": [
                    {"self": f"{self.base_url}/rest/api/2/issue/{issue['id']}/properties/{k}", "key": k}
                    for k in issue["properties"]
                ]
            }

    def property_delete(self, key: str, prop: str, *, user: str) -> None:
        with self.lock:
            issue = self._issue(key)
            if prop not in issue["properties"]:
                raise JiraHttpError(404, [f"Property with key not found: {prop}"])
            self._check_write(issue["project"], user)
            del issue["properties"][prop]

    # ---- misc ---------------------------------------------------------------------------------
    def fields(self) -> list[dict[str, Any]]:
        out = [
            {
                "id": f,
                "key": f,
                "name": f.capitalize(),
                "custom": False,
                "navigable": True,
                "searchable": True,
                "clauseNames": [f],
            }
            for f in SYSTEM_FIELDS
        ]
        for fid, meta in CUSTOM_FIELDS.items():
            out.append(
                {
                    "id": fid,
                    "key": fid,
                    "name": meta["name"],
                    "custom": True,
                    "navigable": True,
                    "searchable": True,
                    "clauseNames": [f"cf[{meta['schema']['customId']}]", meta["name"]],
                    "schema": meta["schema"],
                }
            )
        return out

    def link_types(self) -> dict[str, Any]:
        return {
            "issueLinkTypes": [
                {
                    "id": t["id"],
                    "name": n,
                    "inward": t["inward"],
                    "outward": t["outward"],
                    "self": f"{self.base_url}/rest/api/2/issueLinkType/{t['id']}",
                }
                for n, t in LINK_TYPES.items()
            ]
        }

    def touch_as(self, key: str, *, user: str, summary: str) -> str:
        """A human edit in Jira (bench and tests): returns the new `updated`."""
        self.edit_issue(key, {"fields": {"summary": summary}}, user=user)
        return jira_time(self.issues[key]["updated"])


def _duration_seconds(text: str) -> int | None:
    """Jira's duration text ("1w 2d 3h 30m", "90m", "1.5h") in seconds; None when it is not one."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([wdhm])", text.strip().lower())
    if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([wdhm])|\s+", "", text.strip().lower()):
        return None
    return int(sum(float(n) * _DURATION_UNITS[u] for n, u in parts))


def _duration_text(seconds: int) -> str:
    out = []
    for unit in "wdhm":
        n, seconds = divmod(seconds, _DURATION_UNITS[unit])
        if n:
            out.append(f"{n}{unit}")
    return " ".join(out) or "0m"


def _parse_jira_time(text: str) -> dt.datetime | None:
    """Jira's "2026-12-04T10:00:00.000+0000"."""
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        return None
