"""REST of «Расходы AI»: ``GET /api/usage`` (the list contract) and ``GET /api/usage.csv``."""

from __future__ import annotations

import csv
import io
from typing import Literal

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Query, Router, Schema
from pydantic import ConfigDict, Field

from achilles.datetimes import ApiDate
from achilles.errors import NotFound, PermissionDenied
from achilles.pagination import ListParams, Page
from usage import selectors
from usage.periods import week_of
from usage.selectors import UsageFilter, UsageRow

router = Router(tags=["usage"])


class UsageFilterQuery(Schema):
    """The report's filters: local dates in the organisation's time zone (default: this week)."""

    model_config = ConfigDict(populate_by_name=True)

    date_from: ApiDate | None = Field(default=None, alias="from", description="First day (YYYY-MM-DD), included.")
    date_to: ApiDate | None = Field(default=None, alias="to", description="Last day (YYYY-MM-DD), included.")
    group_by: Literal["user", "group", "model", "agent", "day"] = "user"
    source: Literal["chat", "agents"] | None = None
    user: str | None = Field(default=None, description="One person's username (staff / usage.view_usage for others).")


class UsageListQuery(ListParams, UsageFilterQuery):
    pass


def _filter(request: HttpRequest, query: UsageFilterQuery) -> UsageFilter:
    week = week_of(selectors.org_timezone(), timezone.now())
    viewer = request.user
    user_id = None
    if query.user:
        if not selectors.can_view_everyone(viewer) and query.user != viewer.username:  # type: ignore[arg-type]
            raise PermissionDenied("Only staff or the «Расходы AI» permission see other people's spend.")
        person = selectors.usage_user_get(username=query.user)
        if person is None:
            raise NotFound("no such user", code="user_not_found")
        user_id = person.pk
    return selectors.usage_filter_for(
        viewer=viewer,  # type: ignore[arg-type]
        date_from=query.date_from or week.start,
        date_to=query.date_to or (week.end if query.date_from is None else query.date_from),
        source=query.source,
        user_id=user_id,
    )


class UsageOut(Schema):
    key: str
    label: str
    events: int
    tokens: int
    input_tokens: int
    output_tokens: int
    unsplit_tokens: int
    cost: str | None = Field(description="Money in the platform currency; null when the models carry no prices.")
    currency: str


def _out(row: UsageRow, currency: str) -> UsageOut:
    return UsageOut(
        key=row.key,
        label=row.label,
        events=row.events,
        tokens=row.tokens,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        unsplit_tokens=row.unsplit_tokens,
        cost=str(row.cost) if row.cost is not None else None,
        currency=currency,
    )


@router.get("/usage", response=Page[UsageOut])
def usage_list(request: HttpRequest, query: Query[UsageListQuery]):
    """Spend grouped by person, group, model, agent or day, ordered by that key (keyset pages)."""
    flt = _filter(request, query)
    window = selectors.usage_report_page(flt=flt, group_by=query.group_by, cursor=query.cursor, limit=query.limit)
    currency = selectors.currency()
    return {"items": [_out(row, currency) for row in window.items], "next_cursor": window.next_cursor}


CSV_COLUMNS = (
    "key",
    "label",
    "events",
    "tokens",
    "input_tokens",
    "output_tokens",
    "unsplit_tokens",
    "cost",
    "currency",
)


@router.get("/usage.csv")
def usage_csv(request: HttpRequest, query: Query[UsageFilterQuery]):
    """The same report as CSV, every row at once (UTF-8 with a BOM, so spreadsheets read Cyrillic)."""
    flt = _filter(request, query)
    currency = selectors.currency()
    buffer = io.StringIO()
    buffer.write("\ufeff")
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for row in selectors.usage_report(flt=flt, group_by=query.group_by):
        out = _out(row, currency)
        writer.writerow([getattr(out, name) if getattr(out, name) is not None else "" for name in CSV_COLUMNS])
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    name = f"usage-{query.group_by}-{flt.date_from}-{flt.date_to}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
