"""Who may read a mirrored issue: the one home of the rule behind the hub setting ``project_acl``.

A caller reads an issue when its principals (``achilles.identity.principals_for``: ``user:<id>``,
``group:<name>``, ``everyone``) meet its project's ACL; a project not in the map is ``everyone``'s.
The Knowledge Store's records of the mirror carry the same ACL (``hub.knowledge_feed``), so the hub's
routes, its MCP tools and knowledge search answer alike. Every read and write of an issue goes
through here: lists filter with :func:`issues_readable`, a card or a note fetches with
:func:`issue_readable_get` (an issue you may not read is not found, as if it were not mirrored), and
a batch naming a project you may not read is refused by :func:`projects_write_check` (403: the
project keys are no secret, the settings show them, and a batch may name issues not mirrored yet).
Staff are no exception: whoever sets the map names themselves in it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from achilles.errors import NotFound, PermissionDenied
from achilles.identity import EVERYONE, principals_for
from hub.models import HubSetting, MirrorIssue
from hub.permissions import HubCaller

PROJECT_ACL = "project_acl"
NOT_READABLE = "project_not_readable"


def project_acl_map() -> dict[str, list[str]]:
    """The setting as stored (``{}`` until set): project → principals."""
    value: Any = HubSetting.objects.filter(key=PROJECT_ACL).values_list("value", flat=True).first()
    return dict(value) if isinstance(value, dict) else {}


def project_acl(project: str, acl_map: dict[str, list[str]]) -> list[str]:
    """The ACL of ``project`` under ``acl_map``, sorted (the Knowledge Store's canonical form)."""
    return sorted(set(acl_map.get(project) or [EVERYONE]))


def key_project(key: str) -> str:
    """The project of an issue key (``AURORA-12`` → ``AURORA``)."""
    return key.strip().upper().rpartition("-")[0]


@dataclass(frozen=True)
class ProjectAccess:
    """What one caller may read: the listed projects, and those of them its principals open."""

    listed: frozenset[str]
    readable_listed: frozenset[str]

    def may_read(self, project: str) -> bool:
        return project not in self.listed or project in self.readable_listed

    def q(self, field: str = "project") -> Q:
        """The rule as a filter on ``field`` (a project column)."""
        hidden = self.listed - self.readable_listed
        return ~Q(**{f"{field}__in": sorted(hidden)}) if hidden else Q()


def access_for(*, principals: Iterable[str], acl_map: dict[str, list[str]]) -> ProjectAccess:
    """The rule itself, pure: a listed project is readable when its ACL shares a principal."""
    mine = set(principals)
    return ProjectAccess(
        listed=frozenset(acl_map),
        readable_listed=frozenset(project for project, acl in acl_map.items() if mine & set(acl)),
    )


def readable_projects(user: HubCaller) -> ProjectAccess:
    """The caller's access under the current setting (one read of it, one of the caller's groups)."""
    return access_for(principals=principals_for(user), acl_map=project_acl_map())


def issues_readable(
    user: HubCaller, queryset: QuerySet[MirrorIssue], *, access: ProjectAccess | None = None
) -> QuerySet:
    """``queryset`` without the issues of projects the caller may not read."""
    access = access if access is not None else readable_projects(user)
    return queryset.filter(access.q())


def issue_readable_get(
    *, user: HubCaller, key: str, queryset: QuerySet[MirrorIssue] | None = None, access: ProjectAccess | None = None
) -> MirrorIssue:
    """The mirrored issue ``key`` if the caller may read it; otherwise the same 404 as a key not mirrored."""
    queryset = queryset if queryset is not None else MirrorIssue.objects.all()
    issue = issues_readable(user, queryset, access=access).filter(key=key.strip().upper()).first()
    if issue is None:
        raise NotFound(f"issue {key} is not in the mirror")
    return issue


def projects_write_check(*, user: HubCaller, projects: Iterable[str]) -> None:
    """Refuse (403 ``project_not_readable``) a write naming a project the caller may not read."""
    access = readable_projects(user)
    for project in sorted(set(projects)):
        if not access.may_read(project):
            raise PermissionDenied(
                f"you may not read project {project} (hub setting project_acl), so you may not change its issues",
                code=NOT_READABLE,
            )


def command_projects(parsed: Iterable[Any]) -> set[str]:
    """The projects a batch's parsed commands name: every real key's and every ``ensure_issue``'s
    (a ``$N`` is the issue an earlier command of the batch makes, checked through that command)."""
    projects: set[str] = set()
    for command in parsed:
        if getattr(command, "type", None) == "ensure_issue":
            projects.add(command.project)
        for key in command.issue_keys():
            if not key.startswith("$"):
                projects.add(key_project(key))
    return projects
