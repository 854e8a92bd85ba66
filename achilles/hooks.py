"""A small typed hook registry: the core's actions announce what changed, dependent apps react.

The core (``achilles.services``, ``achilles.platform``) calls ``<hook>.fire(event)`` from the action
itself, inside its transaction; apps subscribe in their ``AppConfig.ready``. No model signals: a
bulk ``.update()`` or a fixture cannot silently skip a reaction, and a save that does not change
the field costs nothing.

| hook | fired by | subscribers |
| --- | --- | --- |
| ``user_timezone_changed`` | ``achilles.services.user_timezone_set`` (admin, API) | agents: moves that owner's calendar slots |
| ``org_timezone_changed`` | ``achilles.platform.platform_settings_update`` (admin, commands) | agents: moves the slots of owners without a zone |
| ``allowed_models_changed`` | ``achilles.services.allowed_model_*`` (admin, commands) | knowledge: drops this process's embedding-config memo |
| ``user_deactivated`` | ``achilles.services.user_active_set`` (admin, directory sign-in and sync) | conversations: closes the account's open websockets (after commit) |
| ``jira_issues_changed`` | ``hub.protocol.mirror_upload`` (the sync agent's uploads), once per page | agents: records the events their subscriptions match (started by the scheduler tick) |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

E = TypeVar("E")


class Hook(Generic[E]):
    """Subscribers are called in subscription order, synchronously, with the event."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._subscribers: list[Callable[[E], None]] = []

    def subscribe(self, subscriber: Callable[[E], None]) -> Callable[[E], None]:
        if subscriber not in self._subscribers:  # ready() may run more than once in tests
            self._subscribers.append(subscriber)
        return subscriber

    def fire(self, event: E) -> None:
        for subscriber in tuple(self._subscribers):
            subscriber(event)


@dataclass(frozen=True)
class UserTimezoneChanged:
    user: Any  # achilles.models.User, after the change
    old: str | None
    new: str | None


@dataclass(frozen=True)
class OrgTimezoneChanged:
    old: str
    new: str


@dataclass(frozen=True)
class AllowedModelsChanged:
    name: str
    kind: str


@dataclass(frozen=True)
class UserDeactivated:
    user_id: int
    reason: str


@dataclass(frozen=True)
class JiraIssueChange:
    """One issue the mirror wrote: what it is now and what changed (``field → [before, after]``)."""

    key: str
    project: str
    issue_type: str
    status: str
    labels: tuple[str, ...]
    kind: str  # created | updated | transitioned (status changed)
    changes: dict[str, list[Any]]
    readers: tuple[str, ...]  # the principals the hub's project ACL lets read the issue


@dataclass(frozen=True)
class JiraIssuesChanged:
    changes: tuple[JiraIssueChange, ...]


user_timezone_changed: Hook[UserTimezoneChanged] = Hook("user_timezone_changed")
org_timezone_changed: Hook[OrgTimezoneChanged] = Hook("org_timezone_changed")
allowed_models_changed: Hook[AllowedModelsChanged] = Hook("allowed_models_changed")
user_deactivated: Hook[UserDeactivated] = Hook("user_deactivated")
jira_issues_changed: Hook[JiraIssuesChanged] = Hook("jira_issues_changed")
