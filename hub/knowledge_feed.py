"""Mirror → Knowledge Store: mirrored issues become KS records (source_system="jira") under the ACL
of their project (hub setting ``project_acl``; a project not listed is readable by ``everyone``)."""

from __future__ import annotations

from achilles.identity import EVERYONE
from hub.models import MirrorComment, MirrorIssue, MirrorLink
from hub.selectors import setting_value
from knowledge import facade

SOURCE_SYSTEM = "jira"


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
    """Upsert the given mirrored issues into the KS; returns how many were written."""
    acl_map = setting_value("project_acl") or {}
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
            acl=acl_map.get(issue.project) or [EVERYONE],
            url=_browse_url(issue),
            links=links.get(issue.id, []),
        )
    return len(issues)


def _browse_url(issue: MirrorIssue) -> str:
    # Jira's REST "self" is https://jira.example/rest/api/2/issue/123 → the browse page of the key.
    self_url = (issue.fields or {}).get("self") if isinstance(issue.fields, dict) else None
    if isinstance(self_url, str) and "/rest/api/" in self_url and self_url.startswith(("http://", "https://")):
        return self_url.split("/rest/api/")[0] + f"/browse/{issue.key}"
    return ""
