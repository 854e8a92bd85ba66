"""Budget alerts: an owner's agents reaching 80 % and 100 % of the weekly token budget.

Until the web app has notifications, an alert is an audit event (``agents.budget_threshold``,
target ``user:<id> week:<Monday> <percent>%``) and a log line — once per owner, week and threshold:
the check runs under the owner's budget lock, so two runs finishing together record it once.
"""

from __future__ import annotations

import logging
from datetime import datetime
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

from achilles.audit import audit_record
from achilles.models import AuditEvent, User
from achilles.platform import platform_settings
from agents.schedule import week_bounds
from agents.selectors import owner_tokens_this_week
from agents.services.runs import owner_budget_lock

logger = logging.getLogger(__name__)

BUDGET_ALERT_ACTION = "agents.budget_threshold"
BUDGET_ALERT_PERCENTS = (80, 100)


def budget_alert_target(*, owner_id: int, week_start: str, percent: int) -> str:
    return f"user:{owner_id} week:{week_start} {percent}%"


def owner_budget_alerts_check(*, run_id: int, now: datetime | None = None) -> list[int]:
    """After a run finished with spend: record each threshold its owner's week has newly reached.
    Returns the percents recorded now (already recorded ones are not repeated)."""
    now = now or timezone.now()
    owner = User.objects.filter(agents__runs__pk=run_id).first()
    if owner is None:
        return []
    budget = platform_settings().weekly_token_budget
    if budget <= 0:
        return []
    recorded: list[int] = []
    with transaction.atomic():
        owner_budget_lock(owner_ids=[owner.pk])
        spent = owner_tokens_this_week(owner=owner, now=now)
        zone = owner.effective_timezone()
        start, _ = week_bounds(zone, now)  # the budget's own week (the owner's Monday)
        week_start = start.astimezone(ZoneInfo(zone)).date().isoformat()
        for percent in BUDGET_ALERT_PERCENTS:
            if spent * 100 < budget * percent:
                break
            target = budget_alert_target(owner_id=owner.pk, week_start=week_start, percent=percent)
            if AuditEvent.objects.filter(action=BUDGET_ALERT_ACTION, target=target).exists():
                continue
            audit_record(
                actor="system",
                action=BUDGET_ALERT_ACTION,
                target=target,
                details={
                    "owner_id": owner.pk,
                    "owner": owner.username,
                    "percent": percent,
                    "spent": spent,
                    "budget": budget,
                    "week_start": week_start,
                },
            )
            recorded.append(percent)
    for percent in recorded:
        logger.warning(
            "agents budget threshold owner=%s percent=%s spent=%s budget=%s week_start=%s",
            owner.username,
            percent,
            spent,
            budget,
            week_start,
        )
    return recorded
