"""The MCP tools' answers (seed 004): pure functions from the hub's read models to Russian text.

No ORM, no Django settings: a unit test renders every answer from hand-made dataclasses. Times are
shown in the caller's time zone (``tz``), dates as ``ДД.ММ.ГГГГ``; command and batch states keep
their API codes (``queued``, ``claimed``, ``done``, ``failed``, ``cancelled``) so a chat client
can quote them back to the REST API.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from hub.contracts import (
    AgentStatus,
    BatchCancelResult,
    BatchCreated,
    BatchSummary,
    BatchView,
    CommandView,
    CommentView,
    IssueCard,
    IssueRow,
    LinkView,
    NotesView,
    SyncRunView,
)

# The seed's lines shared with REST (batch_cancel's claimed-command line, agent_status's lines).
from hub.texts import agent_status_lines, claimed_command_line

UTC = ZoneInfo("UTC")
SUMMARY_MAX = 80
COMMENT_MAX = 300
COMMENTS_SHOWN = 5
DESCRIPTION_MAX = 1000
DASH = "—"

NO_COMMENTS = "комментариев нет"

NOTE_LABELS = {
    "fact_status": "статус по факту",
    "note": "заметка",
    "next_step": "следующий шаг",
    "owner": "ответственный",
}


# ---------------------------------------------------------------- small helpers


def plural(n: int, one: str, few: str, many: str) -> str:
    """Russian plural form for ``n``: 1 команда, 2 команды, 5 команд, 11 команд, 21 команда."""
    n = abs(n)
    if n % 10 == 1 and n % 100 != 11:
        return one
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return few
    return many


def commands_count(n: int) -> str:
    return f"{n} {plural(n, 'команда', 'команды', 'команд')}"


def clip(text: str, limit: int) -> str:
    """One line, at most ``limit`` characters; a clipped text ends with «…» (counted in the limit)."""
    flat = re.sub(r"\s+", " ", text or "").strip()
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


def fmt_date(value: dt.date | None) -> str:
    return value.strftime("%d.%m.%Y") if value else DASH


def fmt_time(value: dt.datetime | None, tz: dt.tzinfo = UTC) -> str:
    if value is None:
        return DASH
    if value.tzinfo is not None:
        value = value.astimezone(tz)
    return value.strftime("%d.%m.%Y %H:%M")


def minutes(seconds: int) -> int:
    """An estimate in whole minutes, rounded up; any work at all is at least a minute."""
    return max(1, math.ceil(seconds / 60)) if seconds > 0 else 0


def estimate_text(seconds: int) -> str:
    m = minutes(seconds)
    return "меньше минуты" if m == 0 else f"~{m} мин"


def or_dash(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if text.strip() else DASH


def version(v: int | None) -> str:
    return f"v{v}" if v is not None else "v?"


# ---------------------------------------------------------------- issues / issue / notes

ISSUES_HEADER = "ключ | тема | статус | срок | исполнитель | спринт | статус по факту"


def issue_row_line(row: IssueRow) -> str:
    return " | ".join(
        [
            row.key,
            clip(row.summary, SUMMARY_MAX) or DASH,
            or_dash(row.status),
            fmt_date(row.duedate),
            or_dash(row.assignee),
            or_dash(row.sprint),
            or_dash(row.fact_status),
        ]
    )


def issues_text(rows: Sequence[IssueRow], *, limit: int) -> str:
    if not rows:
        return "задач не найдено"
    lines = [f"задач: {len(rows)}", ISSUES_HEADER, *(issue_row_line(row) for row in rows)]
    if len(rows) >= limit:
        lines.append(f"показаны первые {limit}: уточните фильтры или увеличьте limit")
    return "\n".join(lines)


def link_line(link: LinkView) -> str:
    arrow, side = ("→", "исходящая") if link.direction == "outward" else ("←", "входящая")
    other = f"{link.other_key} «{clip(link.other_summary, SUMMARY_MAX)}»" if link.other_summary else link.other_key
    return f"{link.link_type} ({side}) {arrow} {other}"


def notes_lines(notes: NotesView | None) -> list[str]:
    if notes is None or not any(getattr(notes, name) for name in NOTE_LABELS):
        return ["заметок нет"]
    return [f"{label}: {or_dash(getattr(notes, name))}" for name, label in NOTE_LABELS.items()]


def notes_text(notes: NotesView, *, tz: dt.tzinfo = UTC) -> str:
    lines = [f"заметки {notes.key} обновлены ({fmt_time(notes.updated_at, tz)}):"]
    lines += [f"  {line}" for line in notes_lines(notes)]
    return "\n".join(lines)


def comment_line(comment: CommentView, *, tz: dt.tzinfo = UTC) -> str:
    return f"{or_dash(comment.author)}, {fmt_time(comment.created, tz)}: {clip(comment.body, COMMENT_MAX)}"


def comments_lines(total: int, comments: Sequence[CommentView], *, tz: dt.tzinfo = UTC) -> list[str]:
    """«комментарии (N):», the five newest (newest first), «ещё M» — or «комментариев нет»."""
    if total <= 0 or not comments:
        return [NO_COMMENTS]
    newest = sorted(comments, key=lambda c: c.created or dt.datetime.min.replace(tzinfo=UTC), reverse=True)
    shown = newest[:COMMENTS_SHOWN]
    lines = [f"комментарии ({total}):", *(f"  {comment_line(c, tz=tz)}" for c in shown)]
    if total > len(shown):
        lines.append(f"  ещё {total - len(shown)}")
    return lines


def command_line(command: CommandView, *, with_batch: bool = False) -> str:
    """``#40 ensure_fields AURORA-1538 — done: duedate: …`` (state codes as in the API)."""
    target = command.key or ("полная синхронизация" if command.type == "refresh" else "")
    head = f"#{command.id} {command.type}" + (f" {target}" if target else "")
    if with_batch:
        head += f" (пакет #{command.batch_id}, {command.author})"
    tail = command.state
    if command.state == "claimed":
        tail += f", выдач: {command.claims}"
    elif command.state == "failed" and command.error:
        tail += f": {clip(command.error, COMMENT_MAX)}"
    elif command.state == "done" and command.result:
        message = command.result.get("message") or ""
        created_key = command.result.get("key") if command.result.get("created") else None
        extra = "; ".join(part for part in (f"создана {created_key}" if created_key else "", message) if part)
        if extra:
            tail += f": {clip(extra, COMMENT_MAX)}"
    elif command.state == "cancelled" and command.force_cancelled:
        tail += " (принудительно)"
    return f"{head} — {tail}"


# Raw Jira fields the card already shows (or that are noise in a chat answer).
SHOWN_FIELDS = frozenset(
    {
        "summary",
        "description",
        "status",
        "priority",
        "assignee",
        "duedate",
        "labels",
        "issuetype",
        "project",
        "updated",
        "issuelinks",
        "comment",
        "sprint",
        "watches",
        "votes",
        "worklog",
        "attachment",
        "subtasks",
        "timetracking",
        "lastViewed",
        "progress",
        "aggregateprogress",
    }
)
OTHER_FIELDS_SHOWN = 15


# DC v2's sprint field: greenhopper's «com.atlassian.greenhopper.service.sprint.Sprint@1eef[…,name=…,…]».
_GREENHOPPER_SPRINT = re.compile(
    r"^com\.atlassian\.greenhopper\.service\.sprint\.Sprint@[0-9a-f]+\[.*?\bname=([^,\]]*)"
)
# Jira's timestamps («2026-11-30T11:50:30.000+0000») and dates («2026-12-24»).
_JIRA_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{4}|Z)$")
_JIRA_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def field_value(value: Any, tz: dt.tzinfo = UTC) -> str:
    """A raw Jira field as a person reads it: objects by name, lists joined, a sprint by its name,
    timestamps in the reader's zone and dates as the card writes them."""
    if isinstance(value, str):
        sprint = _GREENHOPPER_SPRINT.match(value)
        if sprint:
            return sprint.group(1)
        if _JIRA_TIME.match(value):
            return fmt_time(
                dt.datetime.strptime(
                    value.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S" + (".%f" if "." in value else "") + "%z"
                ),
                tz,
            )
        if _JIRA_DATE.match(value):
            try:
                return fmt_date(dt.date.fromisoformat(value))
            except ValueError:
                return value
        return value
    if isinstance(value, dict):
        for name in ("displayName", "name", "value", "key"):
            if value.get(name):
                return str(value[name])
        return _json(value)
    if isinstance(value, list):
        return ", ".join(field_value(item, tz) for item in value)
    return str(value)


def other_fields_lines(fields: Mapping[str, Any], *, tz: dt.tzinfo = UTC) -> list[str]:
    lines = []
    for name in sorted(fields):
        value = fields[name]
        if name in SHOWN_FIELDS or value in (None, "", [], {}):
            continue
        lines.append(f"{name}: {clip(field_value(value, tz), COMMENT_MAX)}")
    return lines[:OTHER_FIELDS_SHOWN]


def issue_text(card: IssueCard, *, tz: dt.tzinfo = UTC) -> str:
    issue = card.issue
    lines = [
        f"{issue.key} — {issue.summary}",
        f"статус: {or_dash(issue.status)} · тип: {or_dash(issue.issue_type)} · приоритет: {or_dash(issue.priority)}",
        f"исполнитель: {or_dash(issue.assignee)} · срок: {fmt_date(issue.duedate)} · спринт: {or_dash(issue.sprint)}",
        f"метки: {', '.join(issue.labels) if issue.labels else DASH}",
        f"обновлена в Jira: {fmt_time(issue.updated, tz)}",
    ]
    lines += other_fields_lines(card.fields, tz=tz)
    if card.description:
        lines.append(f"описание: {clip(card.description, DESCRIPTION_MAX)}")
    lines.append("")
    if card.links:
        lines.append(f"связи ({len(card.links)}):")
        lines += [f"  {link_line(link)}" for link in card.links]
    else:
        lines.append("связей нет")
    lines.append("")
    notes = notes_lines(card.notes)
    if notes == ["заметок нет"]:
        lines += notes
    else:
        lines.append("заметки:")
        lines += [f"  {line}" for line in notes]
    lines.append("")
    if card.recent_commands:
        lines.append("последние команды:")
        lines += [f"  {command_line(c, with_batch=True)}" for c in card.recent_commands]
    else:
        lines.append("команд по задаче не было")
    lines.append("")
    lines += comments_lines(card.comments_total, card.comments, tz=tz)
    return "\n".join(lines)


# ---------------------------------------------------------------- batches


def batch_created_text(created: BatchCreated, *, title: str = "") -> str:
    named = f" «{title}»" if title else ""
    return "\n".join(
        [
            f"пакет #{created.id}{named} создан: {commands_count(created.command_count)}",
            f"оценка: {estimate_text(created.estimate_seconds)} (estimate_seconds: {created.estimate_seconds})",
            f'результат: batch_wait {{"id": {created.id}, "timeout_minutes": '
            f"{min(60, max(5, 2 * minutes(created.estimate_seconds)))}}}",
        ]
    )


BATCH_STATES = {
    "queued": "в очереди",
    "running": "выполняется",
    "done": "выполнен",
    "failed": "завершён с ошибками",
    "cancelled": "отменён",
    "partial": "выполнен частично",
}


def counts_text(counts: Mapping[str, int]) -> str:
    order = ("queued", "claimed", "done", "failed", "cancelled")
    parts = [f"{state} {counts[state]}" for state in order if counts.get(state)]
    parts += [f"{state} {n}" for state, n in sorted(counts.items()) if state not in order and n]
    return ", ".join(parts) or DASH


def batch_text(view: BatchView, *, tz: dt.tzinfo = UTC) -> str:
    """``batch_status`` / ``batch_wait``: every command's state and error, the remaining estimate."""
    title = f" «{view.title}»" if view.title else ""
    state = BATCH_STATES.get(view.state, view.state)
    lines = [
        f"пакет #{view.id}{title} — {view.state} ({state}), автор: {view.author}, создал: {or_dash(view.created_by)}",
        f"{commands_count(len(view.commands))}: {counts_text(view.counts)}",
    ]
    lines += [f"  {command_line(c)}" for c in view.commands]
    if view.finished:
        lines.append(f"завершён: {fmt_time(view.finished_at, tz)}")
    else:
        if view.timed_out:
            lines.append("ожидание истекло, пакет ещё не завершён")
        lines.append(f"осталось: {estimate_text(view.estimate_seconds)}")
    return "\n".join(lines)


def batches_text(batches: Sequence[BatchSummary], *, tz: dt.tzinfo = UTC) -> str:
    if not batches:
        return "пакетов нет"
    lines = [f"пакетов: {len(batches)}"]
    for b in batches:
        title = f" «{clip(b.title, SUMMARY_MAX)}»" if b.title else ""
        lines.append(
            f"#{b.id}{title} — {b.state}: {commands_count(b.command_count)} ({counts_text(b.counts)}), "
            f"{b.author} (создал: {or_dash(b.created_by)}), {fmt_time(b.created_at, tz)}"
        )
    return "\n".join(lines)


def batch_cancel_text(result: BatchCancelResult, *, tz: dt.tzinfo = UTC) -> str:
    lines = [batch_text(result.batch, tz=tz)]
    if result.cancelled:
        lines.append(f"отменено: {', '.join(f'#{i}' for i in result.cancelled)}")
    else:
        lines.append("отменять нечего: команд в очереди нет")
    lines += [claimed_command_line(i) for i in result.claimed]
    return "\n".join(lines)


def command_retry_text(created: BatchCreated, *, command_id: int) -> str:
    return f"команда #{command_id} поставлена заново\n" + batch_created_text(created)


def refresh_queued_text(created: BatchCreated) -> str:
    return (
        f"обновление из Jira поставлено: пакет #{created.id}, {commands_count(created.command_count)}, "
        f"оценка {estimate_text(created.estimate_seconds)}"
    )


# ---------------------------------------------------------------- agent status


def agent_status_text(status: AgentStatus, *, tz: dt.tzinfo = UTC) -> str:
    """HUB-12, the seed's lines — rendered by ``hub.texts`` so REST's ``lines`` and MCP say the same."""
    return "\n".join(agent_status_lines(status, tz=getattr(tz, "key", "UTC")))


# ---------------------------------------------------------------- sync log, settings


def sync_log_text(runs: Sequence[SyncRunView], *, tz: dt.tzinfo = UTC) -> str:
    if not runs:
        return "синхронизаций ещё не было"
    lines = [f"синхронизаций: {len(runs)}"]
    for run in runs:
        counts = ", ".join(f"{k} {v}" for k, v in run.counts.items()) or DASH
        lines.append(
            f"#{run.id} {run.kind} — {run.status}: {fmt_time(run.started_at, tz)} → "
            f"{fmt_time(run.finished_at, tz)}; {counts}"
        )
        lines += [f"  ошибка: {clip(error, COMMENT_MAX)}" for error in run.errors]
    return "\n".join(lines)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def settings_text(values: Mapping[str, Any], *, settings_version: int | None = None) -> str:
    lines = [f"{key} = {_json(value)}" for key, value in sorted(values.items())]
    if settings_version is not None:
        lines.append(f"settings_version: {settings_version}")
    return "\n".join(lines) or "настроек нет"


def settings_set_text(key: str, settings_version: int) -> str:
    return f"{key} сохранён; settings_version: {settings_version} (агент получит настройки при следующем claim)"


# ---------------------------------------------------------------- knowledge


def knowledge_text(candidates: Iterable[Any], withheld: Iterable[Any], *, is_empty: bool) -> str:
    """Candidates with numbered citations, then the withheld coordinates (never titles or text)."""
    candidates, withheld = list(candidates), list(withheld)
    if is_empty:
        return "база знаний пуста"
    lines: list[str] = []
    if candidates:
        lines.append(f"найдено фрагментов: {len(candidates)}")
        for c in candidates:
            source = f" — {c.url}" if c.url else ""
            lines.append(f"[{c.rank}] {c.title} ({c.source_system}, запись {c.record_id}){source}")
            lines.append(f"    {clip(c.text, 700)}")
    else:
        lines.append("не нашёл")
    if withheld:
        lines.append("есть подходящие документы, к которым у вас нет доступа:")
        lines += [f"  источник {w.source_system}, автор {w.author_principal_id or 'неизвестен'}" for w in withheld]
    return "\n".join(lines)
