"""«Расходы AI»: the daily roll-up of spend, kept by the database (migration 0001).

Every figure comes from the stored ``tokens_used`` of assistant messages (``messages``, by the
conversation's user, at ``created_at`` — the answer row is written when the turn finishes) and of
finished agent runs (``agent_runs``, by the run's owner, at ``finished_at``). Triggers on both
tables add and subtract each row's share in the same transaction as the write, so the roll-up is
never a second counter that can drift: it is always the GROUP BY of the raw rows (pinned by a
property test). Days are dates in the organisation's time zone; changing that zone rebuilds the
table (a trigger on ``platform_settings``).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from usage.choices import Source


class UsageDay(models.Model):
    """One day × person × model × source × agent: how many answers or runs, how many tokens."""

    day = models.DateField(help_text="The date in the organisation's time zone.")
    # Plain ids, no foreign keys: the rows are the triggers' business (a cascade deleting a user's
    # messages subtracts their share row by row; an FK cascade here would race it).
    user_id = models.BigIntegerField(help_text="The conversation's user or the run's owner (users.id).")
    model = models.CharField(max_length=100, blank=True, default="", help_text="The model that answered; '' unknown.")
    source = models.CharField(max_length=8, choices=Source.choices)
    agent_id = models.BigIntegerField(null=True, blank=True, help_text="agents.id for agent runs; NULL for chat.")
    events = models.PositiveIntegerField(help_text="Answers or runs with tokens_used > 0.")
    tokens = models.BigIntegerField(help_text="SUM(tokens_used).")
    input_tokens = models.BigIntegerField(help_text="SUM(input_tokens) of the rows that carry the split.")
    output_tokens = models.BigIntegerField(help_text="SUM(output_tokens) of the rows that carry the split.")

    class Meta:
        db_table = "usage_daily"
        ordering = ["day", "user_id"]
        permissions = [("view_usage", "Can view everyone's AI spend («Расходы AI»)")]
        constraints = [
            # One row per key; chat rows (agent_id NULL) are one key too, hence NULLS NOT DISTINCT.
            models.UniqueConstraint(
                fields=["day", "user_id", "model", "source", "agent_id"],
                name="usage_usageday_key_unique",
                nulls_distinct=False,
                violation_error_message="One roll-up row per day, person, model, source and agent.",
            ),
            models.CheckConstraint(
                condition=Q(events__gte=0, tokens__gte=0, input_tokens__gte=0, output_tokens__gte=0)
                & Q(tokens__gte=models.F("input_tokens") + models.F("output_tokens")),
                name="usage_usageday_sums_not_negative",
                violation_error_message="Roll-up sums are never negative and the split never exceeds the total.",
            ),
            models.CheckConstraint(condition=Q(source__in=["chat", "agents"]), name="usage_usageday_source_valid"),
            models.CheckConstraint(
                condition=Q(source="chat", agent_id__isnull=True) | Q(source="agents", agent_id__isnull=False),
                name="usage_usageday_agent_iff_agents",
            ),
        ]
        indexes = [
            # «Мои расходы» and a person's drill-down: one user's days.
            models.Index(fields=["user_id", "day"], name="usage_usageday_user_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} user {self.user_id} {self.source} {self.model}: {self.tokens}"


class _PeriodSums(models.Model):
    """The sums of ``usage_daily`` over a longer period (its first day names it), per person × model ×
    source × agent; the concrete models add the period's date column, its key and its check."""

    user_id = models.BigIntegerField()
    model = models.CharField(max_length=100, blank=True, default="")
    source = models.CharField(max_length=8, choices=Source.choices)
    agent_id = models.BigIntegerField(null=True, blank=True)
    events = models.PositiveIntegerField()
    tokens = models.BigIntegerField()
    input_tokens = models.BigIntegerField()
    output_tokens = models.BigIntegerField()

    class Meta:
        abstract = True
        constraints = [
            models.CheckConstraint(
                condition=Q(events__gte=0, tokens__gte=0, input_tokens__gte=0, output_tokens__gte=0)
                & Q(tokens__gte=models.F("input_tokens") + models.F("output_tokens")),
                name="%(app_label)s_%(class)s_sums_not_negative",
            ),
        ]


class UsageMonth(_PeriodSums):
    """The same sums per calendar month (the first day names it): a quarter's report reads ~30× fewer
    rows. Kept by the same triggers (``usage_apply`` writes both); equal to ``usage_daily`` summed
    by month (pinned by the property test)."""

    month = models.DateField(help_text="The first day of the month, in the organisation's time zone.")

    class Meta:
        db_table = "usage_monthly"
        ordering = ["month", "user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["month", "user_id", "model", "source", "agent_id"],
                name="usage_usagemonth_key_unique",
                nulls_distinct=False,
            ),
            *_PeriodSums.Meta.constraints,
            models.CheckConstraint(condition=Q(month__day=1), name="usage_usagemonth_first_day"),
        ]
        indexes = [models.Index(fields=["user_id", "month"], name="usage_usagemonth_user_idx")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} user {self.user_id} {self.source} {self.model}: {self.tokens}"


class UsageWeek(_PeriodSums):
    """The same sums per week (Monday, as the budget counts weeks): a rolling month's report reads
    whole weeks here. Kept from ``usage_daily`` by a trigger on it, like ``usage_monthly``."""

    week = models.DateField(help_text="The week's Monday, in the organisation's time zone.")

    class Meta:
        db_table = "usage_weekly"
        ordering = ["week", "user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["week", "user_id", "model", "source", "agent_id"],
                name="usage_usageweek_key_unique",
                nulls_distinct=False,
            ),
            *_PeriodSums.Meta.constraints,
            models.CheckConstraint(condition=Q(week__iso_week_day=1), name="usage_usageweek_monday"),
        ]
        indexes = [models.Index(fields=["user_id", "week"], name="usage_usageweek_user_idx")]

    def __str__(self) -> str:
        return f"week of {self.week} user {self.user_id} {self.source} {self.model}: {self.tokens}"
