"""Mirror → Knowledge Store: mirrored issues become KS records (source_system="jira") under the ACL
of their project (hub setting ``project_acl``; a project not listed is readable by ``everyone``;
the rule lives in ``hub.access``).

Two writers, one ACL: a change of the setting re-ACLs the project's records in its own transaction
(:func:`project_acl_apply`), and a feed writes each record under the map it read, then — under the
setting's lock, shared — puts right any record a change committed meanwhile left behind."""

from __future__ import annotations

from collections import defaultdict

from django.db import connection, transaction

from hub.access import project_acl, project_acl_map
from hub.models import MirrorComment, MirrorIssue, MirrorLink
from knowledge import facade

SOURCE_SYSTEM = "jira"
# pg_advisory_xact_lock(int, int) key of the project ACL: a setting change holds it exclusively, a
# feed's final ACL check shares it ("hu", 1).
PROJECT_ACL_LOCK = (0x6875, 1)


def issue_text(issue: MirrorIssue, comments: list[MirrorComment]) -> str:
    """What the KS indexes: the fields a reader asks about, the description, the comments."""
    lines = [
        f"{issue.key}: {issue.summary}",
        f"Статус: {issue.status or '—'}; тип: {issue.issue_type or '—'}; приоритет: {issue.priority or '—'}",
        f"Исполнитель: {issue.assignee or '—'}; срок: {issue.duedate.isoformat() if issue.duedate else '—'}; "
        f"спринт: {issue.sprint or '—'}",
    ]
    if issue.labels:
        lines.append("Метки: " + ", ".join(issue.labels))
    if issue.description:
        lines += ["", issue.description]
    if comments:
        lines += ["", "Комментарии:"]
        for comment in comments:
            when = comment.created.date().isoformat() if comment.created else ""
            lines.append(f"{comment.author} ({when}): {comment.body}")
    return "\n".join(lines)


def mirror_to_knowledge(*, issue_ids: list[int]) -> int:
    """Upsert the given mirrored issues into the KS; returns how many were written. Run it outside a
    transaction (the Celery task, the on-commit fallback): its final ACL check waits for a setting
    change in flight, which may be waiting for the rows an enclosing transaction would hold."""
    acl_map = project_acl_map()
    issues = list(MirrorIssue.objects.filter(pk__in=issue_ids).order_by("key"))
    comments: dict[int, list[MirrorComment]] = {}
    for comment in MirrorComment.objects.filter(issue_id__in=issue_ids).order_by("created", "id"):
        comments.setdefault(comment.issue_id, []).append(comment)
    links: dict[int, list[tuple[str, str]]] = {}
    for link in MirrorLink.objects.filter(issue_id__in=issue_ids, direction="outward"):
        links.setdefault(link.issue_id, []).append((link.other_key, link.link_type))
    for issue in issues:
        facade.upsert_record(
            source_system=SOURCE_SYSTEM,
            external_id=issue.key,
            title=f"{issue.key} {issue.summary}"[:500],
            text=issue_text(issue, comments.get(issue.id, [])),
            acl=project_acl(issue.project, acl_map),
            url=_browse_url(issue),
            links=links.get(issue.id, []),
        )
    _acl_settle(issues)
    return len(issues)


def project_acl_lock(*, shared: bool) -> None:
    """Take the project ACL's advisory lock for the rest of the current transaction."""
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", list(PROJECT_ACL_LOCK))


def mirrored_projects() -> set[str]:
    """The projects of the mirror's issues."""
    return set(MirrorIssue.objects.order_by().values_list("project", flat=True).distinct())


def project_acl_apply(*, acl_map: dict[str, list[str]], projects: set[str]) -> dict[str, int]:
    """Put the records of every mirrored issue of ``projects`` under their ACL in ``acl_map``, in the
    caller's transaction; returns the records changed per project (those with none left out)."""
    changed: dict[str, int] = {}
    for project in sorted(projects):
        keys = list(MirrorIssue.objects.filter(project=project).values_list("key", flat=True))
        count = facade.records_acl_set(
            source_system=SOURCE_SYSTEM, external_ids=keys, acl=project_acl(project, acl_map)
        )
        if count:
            changed[project] = count
    return changed


def _acl_settle(issues: list[MirrorIssue]) -> None:
    # A setting change that committed after this feed read the map re-ACLed the records that existed
    # then, not the ones written since under the old map. Under the shared lock the map read here is
    # the latest (a change in flight is waited for; a later one sees these records committed).
    by_project: dict[str, list[str]] = defaultdict(list)
    for issue in issues:
        by_project[issue.project].append(issue.key)
    if not by_project:
        return
    with transaction.atomic():
        project_acl_lock(shared=True)
        acl_map = project_acl_map()
        for project, keys in sorted(by_project.items()):
            facade.records_acl_set(source_system=SOURCE_SYSTEM, external_ids=keys, acl=project_acl(project, acl_map))


def _browse_url(issue: MirrorIssue) -> str:
    # Jira's REST "self" is https://jira.example/rest/api/2/issue/123 → the browse page of the key.
    self_url = (issue.fields or {}).get("self") if isinstance(issue.fields, dict) else None
    if isinstance(self_url, str) and "/rest/api/" in self_url and self_url.startswith(("http://", "https://")):
        return self_url.split("/rest/api/")[0] + f"/browse/{issue.key}"
    return ""
