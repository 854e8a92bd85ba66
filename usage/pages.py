"""Server-rendered pages of «Расходы AI»: the admin report (``/usage/``) and «Мои расходы»
(``/usage/me/``). Reads go through ``usage.selectors``; amounts only, never conversations' content."""

from __future__ import annotations

from datetime import date

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from achilles.errors import ValidationFailed
from achilles.models import User
from achilles.platform import platform_settings
from achilles.selectors import users_by_ids
from agents.selectors import agent_list_for_owner, owner_tokens_this_week, owners_tokens_this_week
from usage import selectors
from usage.chart import stacked_bars
from usage.choices import GroupBy, Source
from usage.periods import PERIOD_KINDS, Period, month_of, period_for, week_of
from usage.selectors import UsageFilter, UsageRow

SOURCE_RU = {Source.CHAT: gettext_lazy("чат"), Source.AGENTS: gettext_lazy("агенты")}
SORTS = ("tokens", "name", "cost")


def _date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def _period(request, tz: str) -> Period:
    kind = request.GET.get("period", "week")
    kind = kind if kind in PERIOD_KINDS else "week"
    start, end = _date(request.GET.get("from")), _date(request.GET.get("to"))
    if kind == "custom" and (start is None or end is None or end < start):
        kind = "week"
    return period_for(kind, tz_name=tz, now=timezone.now(), start=start, end=end)


def _sorted(rows: list[UsageRow], sort: str) -> list[UsageRow]:
    if sort == "name":
        return sorted(rows, key=lambda r: (r.label or r.key).casefold())
    if sort == "cost":
        return sorted(rows, key=lambda r: (-(r.cost or 0), -r.tokens, r.key))
    return sorted(rows, key=lambda r: (-r.tokens, r.key))


def _share(spent: int, budget: int) -> int | None:
    return round(100 * spent / budget) if budget > 0 else None


@login_required
def usage_page(request):
    """«Расходы AI»: staff or ``usage.view_usage``; others get 403."""
    if not selectors.can_view_everyone(request.user):
        raise PermissionDenied
    tz = selectors.org_timezone()
    period = _period(request, tz)
    stack = "source" if request.GET.get("stack") == "source" else "model"
    sort = request.GET.get("sort") if request.GET.get("sort") in SORTS else "tokens"
    try:
        flt = selectors.usage_filter_for(viewer=request.user, date_from=period.start, date_to=period.end)
    except ValidationFailed:
        period = week_of(tz, timezone.now())
        flt = selectors.usage_filter_for(viewer=request.user, date_from=period.start, date_to=period.end)
    tables = {g: _sorted(selectors.usage_report(flt=flt, group_by=g), sort) for g in GroupBy.values if g != "day"}
    settings_row = platform_settings()
    now = timezone.now()
    # The weekly budget share of agent owners: the budget's own figure (the owner's week, raw runs).
    owners = _owners(tables[GroupBy.USER], tables[GroupBy.AGENT])
    spent = owners_tokens_this_week(owners=owners, now=now)
    budget = settings_row.weekly_token_budget
    shares = {pk: _share(tokens, budget) for pk, tokens in spent.items()}
    chart = stacked_bars(
        days=period.days,
        points=[(p.day, p.stack, p.tokens) for p in selectors.usage_series(flt=flt, stack_by=stack)],
        labels=SOURCE_RU if stack == "source" else {},
    )
    person = None
    drill: dict = {}
    username = request.GET.get("person")
    if username:
        person = selectors.usage_user_get(username=username)
        if person is not None:
            own = UsageFilter(date_from=flt.date_from, date_to=flt.date_to, user_id=person.pk)
            drill = {
                "agents": selectors.usage_report(flt=own, group_by=GroupBy.AGENT, by_tokens=True),
                "models": selectors.usage_report(flt=own, group_by=GroupBy.MODEL, by_tokens=True),
                "conversations": selectors.usage_conversations_for_user(user_id=person.pk, flt=own),
                "week_spent": spent.get(person.pk, owner_tokens_this_week(owner=person, now=now)),
            }
    return render(
        request,
        "usage.html",
        {
            "period": period,
            "kinds": [("week", _("неделя")), ("month", _("месяц")), ("quarter", _("квартал")), ("custom", _("период"))],
            "stack": stack,
            "sort": sort,
            "totals": selectors.usage_totals(flt=flt),
            "chart": chart,
            "people": [(row, shares.get(row.ref_id) if row.ref_id else None) for row in tables[GroupBy.USER]],
            "groups": tables[GroupBy.GROUP],
            "models": tables[GroupBy.MODEL],
            "agents": [(row, shares.get(row.ref_id) if row.ref_id else None) for row in tables[GroupBy.AGENT]],
            "person": person,
            "drill": drill,
            "budget": budget,
            "currency": settings_row.currency,
            "tz": tz,
        },
    )


def _owners(people: list[UsageRow], agents: list[UsageRow]) -> list[User]:
    ids = {r.ref_id for r in people if r.ref_id} | {r.ref_id for r in agents if r.ref_id}
    return users_by_ids(ids=ids)


@login_required
def usage_me_page(request):
    """«Мои расходы»: my week and month by model and by agent, and my agents' budget left this week."""
    tz = selectors.org_timezone()
    now = timezone.now()
    sections = []
    for title, period in ((_("Эта неделя"), week_of(tz, now)), (_("Этот месяц"), month_of(tz, now))):
        flt = selectors.usage_filter_for(
            viewer=request.user, date_from=period.start, date_to=period.end, user_id=request.user.pk
        )
        sections.append(
            {
                "title": title,
                "period": period,
                "totals": selectors.usage_totals(flt=flt),
                "models": selectors.usage_report(flt=flt, group_by=GroupBy.MODEL, by_tokens=True),
                "agents": selectors.usage_report(flt=flt, group_by=GroupBy.AGENT, by_tokens=True),
            }
        )
    settings_row = platform_settings()
    spent = owner_tokens_this_week(owner=request.user, now=now)
    budget = settings_row.weekly_token_budget
    return render(
        request,
        "usage_me.html",
        {
            "sections": sections,
            "has_agents": agent_list_for_owner(user=request.user).exists(),
            "week_spent": spent,
            "budget": budget,
            "budget_left": max(0, budget - spent),
            "budget_share": _share(spent, budget),
            "currency": settings_row.currency,
        },
    )
