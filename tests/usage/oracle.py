"""The raw sums the roll-up must equal: a plain Python GROUP BY over ``messages`` and ``agent_runs``."""

from __future__ import annotations

from collections import defaultdict
from zoneinfo import ZoneInfo


def raw_sums() -> dict[tuple, tuple[int, int, int, int]]:
    """(day, user_id, model, source, agent_id) → (events, tokens, input_tokens, output_tokens)."""
    from achilles.models import PlatformSettings
    from agents.models import AgentRun
    from conversations.models import Message

    zone = ZoneInfo(PlatformSettings.objects.get(pk=1).timezone)
    sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for created, user_id, model, tokens, inputs, outputs in Message.objects.filter(
        role="assistant", tokens_used__gt=0
    ).values_list("created_at", "conversation__user_id", "model", "tokens_used", "input_tokens", "output_tokens"):
        row = sums[(created.astimezone(zone).date(), user_id, model or "", "chat", None)]
        row[0] += 1
        row[1] += tokens
        row[2] += inputs or 0
        row[3] += outputs or 0
    for finished, owner_id, agent_id, model, tokens, inputs, outputs in AgentRun.objects.filter(
        finished_at__isnull=False, tokens_used__gt=0
    ).values_list(
        "finished_at", "agent__owner_id", "agent_id", "model", "tokens_used", "input_tokens", "output_tokens"
    ):
        row = sums[(finished.astimezone(zone).date(), owner_id, model or "", "agents", agent_id)]
        row[0] += 1
        row[1] += tokens
        row[2] += inputs or 0
        row[3] += outputs or 0
    return {key: tuple(value) for key, value in sums.items()}


def rollup() -> dict[tuple, tuple[int, int, int, int]]:
    from usage.models import UsageDay

    return {
        (r.day, r.user_id, r.model, r.source, r.agent_id): (r.events, r.tokens, r.input_tokens, r.output_tokens)
        for r in UsageDay.objects.all()
    }


def monthly() -> dict[tuple, tuple[int, int, int, int]]:
    from usage.models import UsageMonth

    return {
        (r.month, r.user_id, r.model, r.source, r.agent_id): (r.events, r.tokens, r.input_tokens, r.output_tokens)
        for r in UsageMonth.objects.all()
    }


def daily_by_month() -> dict[tuple, tuple[int, int, int, int]]:
    sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for (day, *rest), values in rollup().items():
        row = sums[(day.replace(day=1), *rest)]
        for i, v in enumerate(values):
            row[i] += v
    return {key: tuple(value) for key, value in sums.items()}


def weekly() -> dict[tuple, tuple[int, int, int, int]]:
    from usage.models import UsageWeek

    return {
        (r.week, r.user_id, r.model, r.source, r.agent_id): (r.events, r.tokens, r.input_tokens, r.output_tokens)
        for r in UsageWeek.objects.all()
    }


def daily_by_week() -> dict[tuple, tuple[int, int, int, int]]:
    from datetime import timedelta

    sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for (day, *rest), values in rollup().items():
        row = sums[(day - timedelta(days=day.weekday()), *rest)]
        for i, v in enumerate(values):
            row[i] += v
    return {key: tuple(value) for key, value in sums.items()}
