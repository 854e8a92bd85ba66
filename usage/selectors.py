"""Reads of «Расходы AI»: reports over the daily roll-up (``usage_daily``), with the permission built in.

Everyone may read their own spend; everyone's needs staff or the ``usage.view_usage`` permission
(:func:`can_view_everyone`). Reports read only the roll-up (and the names beside it): one indexed
range of days, whatever the size of ``messages`` and ``agent_runs``. Amounts only — a
conversation is named by its id and date, never by its title or content.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection

from achilles.errors import PermissionDenied, ValidationFailed
from achilles.models import User
from achilles.pagination import DEFAULT_LIMIT, Window, values_cursor_decode, values_cursor_encode
from achilles.platform import platform_settings
from usage.choices import GroupBy, Source
from usage.periods import MAX_PERIOD_DAYS, period_spans

VIEW_PERMISSION = "usage.view_usage"

# What a grouping reads: the raw columns it aggregates by first (ids, never names: a small hash
# aggregate), then the key (the list's order, unique per item), its label and the joins for them.
# Keys are compared and ordered in the "C" collation, so the order is the bytes' and never the locale's.
_GROUPS: dict[str, dict[str, str]] = {
    GroupBy.USER: {
        "by": "u.user_id",
        "key": 'us.username COLLATE "C"',
        "label": "COALESCE(NULLIF(TRIM(us.first_name || ' ' || us.last_name), ''), us.username)",
        "extra": "us.id",
        "join": "JOIN users us ON us.id = a.user_id",
    },
    GroupBy.GROUP: {
        "by": "u.user_id",
        "key": "COALESCE(g.name, '') COLLATE \"C\"",
        "label": "COALESCE(g.name, '')",
        "extra": "NULL::bigint",
        "join": "LEFT JOIN users_groups ug ON ug.user_id = a.user_id LEFT JOIN auth_group g ON g.id = ug.group_id",
    },
    GroupBy.MODEL: {"by": "", "key": 'a.model COLLATE "C"', "label": "a.model", "extra": "NULL::bigint", "join": ""},
    GroupBy.AGENT: {
        "by": "u.agent_id, u.user_id",
        "key": "a.agent_id",
        "label": "COALESCE(ag.name, '')",
        "extra": "a.user_id",
        "join": "LEFT JOIN agents ag ON ag.id = a.agent_id",
    },
    GroupBy.DAY: {"by": "u.day", "key": "a.day", "label": "a.day::text", "extra": "NULL::bigint", "join": ""},
}

# Money: priced per million tokens, by the allow-list row of the model's name; a model without
# prices adds no cost (NULL, not 0 — "no cost shown"); totals without a split carry no price.
_COST = """CASE WHEN m.input_price_per_mtok IS NULL AND m.output_price_per_mtok IS NULL THEN NULL
    ELSE (COALESCE(a.input_tokens * m.input_price_per_mtok, 0)
          + COALESCE(a.output_tokens * m.output_price_per_mtok, 0)) / 1000000 END"""


@dataclass(frozen=True)
class UsageRow:
    """One line of a report: the group's key and label, counts and tokens, and the cost if priced."""

    key: str
    label: str
    events: int
    tokens: int
    input_tokens: int
    output_tokens: int
    unsplit_tokens: int  # tokens of rows stored before the split (total only)
    cost: Decimal | None
    ref_id: int | None = None  # the user's id (group_by=user) or the agent's owner (group_by=agent)


@dataclass(frozen=True)
class UsageFilter:
    """What a report covers: local dates [date_from, date_to], a source, one person (None = everyone)."""

    date_from: date
    date_to: date
    source: str | None = None
    user_id: int | None = None


def can_view_everyone(user: User) -> bool:
    return bool(user.is_staff or user.has_perm(VIEW_PERMISSION))


def usage_filter_for(
    *, viewer: User, date_from: date, date_to: date, source: str | None = None, user_id: int | None = None
) -> UsageFilter:
    """The filter a viewer may read: anyone their own spend, staff or ``usage.view_usage`` everyone's."""
    if date_to < date_from:
        raise ValidationFailed("to is on or after from", field="to")
    if (date_to - date_from).days >= MAX_PERIOD_DAYS:
        raise ValidationFailed(f"a report covers at most {MAX_PERIOD_DAYS} days", field="to")
    if source is not None and source not in Source.values:
        raise ValidationFailed("source is chat or agents", field="source")
    if not can_view_everyone(viewer):
        if user_id is not None and user_id != viewer.pk:
            raise PermissionDenied("Only staff or the «Расходы AI» permission see other people's spend.")
        user_id = viewer.pk
    return UsageFilter(date_from=date_from, date_to=date_to, source=source, user_id=user_id)


def _filters(flt: UsageFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if flt.source:
        clauses.append("source = %s")
        params.append(flt.source)
    if flt.user_id is not None:
        clauses.append("user_id = %s")
        params.append(flt.user_id)
    return "".join(f" AND {c}" for c in clauses), params


def _spans(flt: UsageFilter, *, daily_only: bool = False) -> tuple[str, list[Any]]:
    """The roll-up rows of the period as one relation: whole calendar months from ``usage_monthly``,
    whole weeks from ``usage_weekly``, the days left from ``usage_daily`` (``daily_only``: every day
    from ``usage_daily``, for a report by day)."""
    extra, extra_params = _filters(flt)
    columns = "user_id, model, source, agent_id, events, tokens, input_tokens, output_tokens"
    if daily_only:
        sql = f"SELECT day, {columns} FROM usage_daily WHERE day >= %s AND day <= %s{extra}"
        return sql, [flt.date_from, flt.date_to, *extra_params]
    spans = period_spans(flt.date_from, flt.date_to)
    parts: list[str] = []
    params: list[Any] = []
    for table, column, ranges in (
        ("usage_monthly", "month", spans.months),
        ("usage_weekly", "week", spans.weeks),
        ("usage_daily", "day", spans.days),
    ):
        if not ranges:
            continue
        within = " OR ".join(f"({column} >= %s AND {column} < %s)" for _ in ranges)
        parts.append(f"SELECT {columns} FROM {table} WHERE ({within}){extra}")
        params += [bound for pair in ranges for bound in pair] + extra_params
    return " UNION ALL ".join(parts), params


def _report_sql(
    group_by: str, flt: UsageFilter, *, after: Any = None, limit: int | None = None, order: str = "key"
) -> tuple[str, list[Any]]:
    spec = _GROUPS[group_by]
    spans, params = _spans(flt, daily_only=group_by == GroupBy.DAY)
    by = f"{spec['by']}, u.model" if spec["by"] else "u.model"
    where = " WHERE u.source = 'agents'" if group_by == GroupBy.AGENT else ""
    outer = ""
    if after is not None:
        outer = " WHERE r.key > %s"
    sql = f"""
WITH u AS ({spans}),
a AS (SELECT {by}, SUM(u.events) AS events, SUM(u.tokens) AS tokens, SUM(u.input_tokens) AS input_tokens,
             SUM(u.output_tokens) AS output_tokens
      FROM u{where} GROUP BY {by})
SELECT * FROM (
    SELECT {spec["key"]} AS key, {spec["label"]} AS label, {spec["extra"]} AS ref_id,
           SUM(a.events) AS events, SUM(a.tokens) AS tokens, SUM(a.input_tokens) AS input_tokens,
           SUM(a.output_tokens) AS output_tokens, SUM({_COST}) AS cost
    FROM a LEFT JOIN agent_models m ON m.name = a.model {spec["join"]}
    GROUP BY 1, 2, 3
) r{outer}
ORDER BY {"r.key" if order == "key" else "r.tokens DESC, r.key"}"""
    if after is not None:
        params.append(after)
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    return sql, params


def _rows(sql: str, params: Sequence[Any]) -> list[UsageRow]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    rows = []
    for key, label, ref_id, events, tokens, inputs, outputs, cost in fetched:
        rows.append(
            UsageRow(
                key=key.isoformat() if isinstance(key, date) else str(key),
                label=label or "",
                events=int(events),
                tokens=int(tokens),
                input_tokens=int(inputs),
                output_tokens=int(outputs),
                unsplit_tokens=int(tokens) - int(inputs) - int(outputs),
                cost=cost.quantize(Decimal("0.000001")) if cost is not None else None,
                ref_id=ref_id,
            )
        )
    return rows


def _cursor_value(group_by: str, value: Any) -> Any:
    if group_by == GroupBy.AGENT:
        if not isinstance(value, int):
            raise ValidationFailed("bad cursor", field="cursor", code="bad_cursor")
        return value
    if not isinstance(value, str):
        raise ValidationFailed("bad cursor", field="cursor", code="bad_cursor")
    if group_by == GroupBy.DAY:
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise ValidationFailed("bad cursor", field="cursor", code="bad_cursor") from None
    return value


def usage_report_page(
    *, flt: UsageFilter, group_by: str, cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> Window[UsageRow]:
    """One page of the report grouped by ``group_by``, in the order of its key (keyset, one query)."""
    scope = f"usage:{group_by}"
    after = None
    if cursor:
        after = _cursor_value(group_by, values_cursor_decode(cursor, scope=scope, count=1)[0])
    rows = _rows(*_report_sql(group_by, flt, after=after, limit=limit + 1))
    if len(rows) <= limit:
        return Window(items=rows, next_cursor=None)
    rows = rows[:limit]
    last: Any = int(rows[-1].key) if group_by == GroupBy.AGENT else rows[-1].key
    return Window(items=rows, next_cursor=values_cursor_encode([last], scope=scope))


def usage_report(*, flt: UsageFilter, group_by: str, by_tokens: bool = False) -> list[UsageRow]:
    """The whole report (the CSV export and the page): by key, or by tokens (largest first)."""
    return _rows(*_report_sql(group_by, flt, order="tokens" if by_tokens else "key"))


def usage_totals(*, flt: UsageFilter) -> UsageRow:
    """The period's totals (the header of the page)."""
    spans, params = _spans(flt)
    sql = f"""
WITH u AS ({spans}),
a AS (SELECT u.model, SUM(u.events) AS events, SUM(u.tokens) AS tokens, SUM(u.input_tokens) AS input_tokens,
             SUM(u.output_tokens) AS output_tokens FROM u GROUP BY u.model)
SELECT 'total', '', NULL::bigint, COALESCE(SUM(a.events), 0), COALESCE(SUM(a.tokens), 0),
       COALESCE(SUM(a.input_tokens), 0), COALESCE(SUM(a.output_tokens), 0), SUM({_COST})
FROM a LEFT JOIN agent_models m ON m.name = a.model"""
    return _rows(sql, params)[0]


@dataclass(frozen=True)
class SeriesPoint:
    day: date
    stack: str  # a model's name or a source
    tokens: int


def usage_series(*, flt: UsageFilter, stack_by: str) -> list[SeriesPoint]:
    """Tokens per day and model (``stack_by="model"``) or per day and source: the chart's stacks."""
    spans, params = _spans(flt, daily_only=True)
    column = "u.model" if stack_by == "model" else "u.source"
    sql = f"WITH u AS ({spans}) SELECT u.day, {column}, SUM(u.tokens) FROM u GROUP BY 1, 2 ORDER BY 1, 2"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [SeriesPoint(day=d, stack=s or "", tokens=int(t)) for d, s, t in cursor.fetchall()]


@dataclass(frozen=True)
class ConversationSpend:
    """A conversation's token total in the period: its id and first answer's date, never its content."""

    conversation_id: str
    first_answer: datetime
    answers: int
    tokens: int


def usage_conversations_for_user(*, user_id: int, flt: UsageFilter, limit: int = 100) -> list[ConversationSpend]:
    """A person's conversations by tokens spent in the period (the drill-down; raw rows of one user,
    read through the conversations' user index)."""
    tz = platform_settings().timezone
    sql = """
SELECT c.id, MIN(m.created_at), COUNT(*), SUM(m.tokens_used)
FROM conversations c JOIN messages m ON m.conversation_id = c.id
WHERE c.user_id = %s AND m.role = 'assistant' AND m.tokens_used > 0
  AND (m.created_at AT TIME ZONE %s)::date BETWEEN %s AND %s
GROUP BY c.id ORDER BY 4 DESC, 1 LIMIT %s"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id, tz, flt.date_from, flt.date_to, limit])
        return [
            ConversationSpend(conversation_id=str(cid), first_answer=first, answers=int(n), tokens=int(t))
            for cid, first, n, t in cursor.fetchall()
        ]


def usage_user_get(*, username: str) -> User | None:
    return User.objects.filter(username=username).first()


def org_timezone() -> str:
    return platform_settings().timezone


def currency() -> str:
    return platform_settings().currency
