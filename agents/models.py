"""Tables of the Agent Engine: ``agents`` and ``agent_runs`` (SPEC §5).

The invariants live in the database (migration 0001): one active run per agent (partial
UNIQUE), a skipped run never started (CHECK), FK actions ON DELETE CASCADE / SET NULL, a
closed gate clears ``next_run_at`` (trigger + CHECK), an owner's deactivation disables their
agents (trigger on ``users``), ``updated_at`` bumped by trigger.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from achilles.models import AllowedModel, TimestampedModel, User
from agents.choices import AgentStatus, JiraEventKind, RunReason, RunState, RunTrigger


class Agent(TimestampedModel):
    """An employee's agent: instructions run on a schedule or on demand, within the owner's budget."""

    # db_index=False: agents_agent_owner_idx below is the owner index (a second one cost every write).
    owner = models.ForeignKey(
        User, verbose_name=_("владелец"), on_delete=models.DO_NOTHING, related_name="agents", db_index=False
    )
    name = models.CharField(_("название"), max_length=200)
    instructions = models.TextField(_("инструкции"), blank=True, default="")
    # db_index=False: the tick's every slot move wrote into it (migration 0009); its one reader, the
    # database's ON DELETE SET NULL when a model leaves the allow-list, reads the table instead.
    model = models.ForeignKey(
        AllowedModel,
        verbose_name=_("модель"),
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="agents",
        db_index=False,
    )
    schedule = models.JSONField(
        _("расписание"),
        null=True,
        blank=True,
        help_text=_(
            'Пусто — только вручную; <code>{"type": "interval", "every_minutes": N}</code> или <code>{"type": "calendar", "weekday": 0-6, "time": "HH:MM"}</code>.'
        ),
    )
    next_run_at = models.DateTimeField(
        _("следующий запуск"), null=True, blank=True, help_text=_("UTC; пусто — планировщик агента не рассматривает.")
    )
    enabled = models.BooleanField(_("включён владельцем"), default=True, help_text=_("Выключатель владельца."))
    admin_paused = models.BooleanField(
        _("приостановлен администратором"),
        default=False,
        help_text=_("Блокировка администратора платформы: держится, пока её не снимут."),
    )

    class Meta:
        db_table = "agents"
        ordering = ["id"]
        indexes = [
            # The due scan: only schedulable agents are in the index at all, so a tick over 100k
            # agents reads just the due prefix.
            models.Index(fields=["next_run_at"], name="agents_agent_due_idx", condition=Q(next_run_at__isnull=False)),
            models.Index(fields=["owner"], name="agents_agent_owner_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=~Q(name=""),
                name="agents_agent_name_not_empty",
                violation_error_message="An agent needs a name.",
            ),
            models.CheckConstraint(
                condition=Q(next_run_at__isnull=True)
                | (Q(enabled=True) & Q(admin_paused=False) & Q(model__isnull=False) & Q(schedule__isnull=False)),
                name="agents_agent_closed_gate_not_scheduled",
                violation_error_message="An agent with a closed gate or no schedule has no next run.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def gates_open(self) -> bool:
        return self.enabled and not self.admin_paused and self.model_id is not None

    def status(self, active_state: str | None = None) -> str:
        """Summary of the gates and the active run (``active_state`` of the queued/running run, if any)."""
        if self.admin_paused:
            return AgentStatus.PAUSED_BY_ADMIN
        if not self.enabled:
            return AgentStatus.DISABLED
        if self.model_id is None:
            return AgentStatus.NO_MODEL
        if active_state in (RunState.RUNNING, RunState.QUEUED):
            return AgentStatus(active_state)
        return AgentStatus.SCHEDULED if self.schedule else AgentStatus.MANUAL_ONLY


class AgentRun(TimestampedModel):
    """One run of an agent: queued → running → succeeded | failed, or skipped (never started)."""

    # db_index=False: agents_agentrun_agent_idx (agent, -id) leads with it (a second one cost every write).
    agent = models.ForeignKey(
        Agent, verbose_name=_("агент"), on_delete=models.DO_NOTHING, related_name="runs", db_index=False
    )
    trigger = models.CharField(_("повод"), max_length=16, choices=RunTrigger.choices)
    state = models.CharField(_("состояние"), max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    reason = models.CharField(_("причина"), max_length=32, choices=RunReason.choices, blank=True, default="")
    output = models.TextField(_("результат"), blank=True, default="")
    # What the output's [N] markers cite: {marker, record_id, title, url, source_system, chunk_text},
    # copies as the run's search showed them (their record's access is checked again when read).
    sources = models.JSONField(_("источники"), null=True, blank=True)  # NULL: none (the scheduler INSERTs runs by SQL)
    error = models.TextField(_("ошибка"), blank=True, default="")
    tokens_used = models.PositiveIntegerField(_("токенов израсходовано"), default=0)
    # The split of tokens_used (since «Расходы AI»; older runs carry the total only) and the model
    # that actually ran (the agent's model may change or leave the allow-list later).
    input_tokens = models.PositiveIntegerField(_("входных токенов"), null=True, blank=True)
    output_tokens = models.PositiveIntegerField(_("выходных токенов"), null=True, blank=True)
    model = models.CharField(
        _("модель"), max_length=100, null=True, blank=True, help_text=_("Факт: модель, к которой обращался запуск.")
    )
    scheduled_for = models.DateTimeField(
        _("запланирован на"), null=True, blank=True, help_text=_("Время по расписанию, на которое приходился запуск.")
    )
    enqueued_at = models.DateTimeField(
        _("поставлен в очередь"), null=True, blank=True, help_text=_("Когда задача попала в брокер.")
    )
    started_at = models.DateTimeField(_("начат"), null=True, blank=True)
    finished_at = models.DateTimeField(_("закончен"), null=True, blank=True)
    heartbeat_at = models.DateTimeField(_("последний сигнал"), null=True, blank=True)
    worker = models.CharField(
        _("исполнитель"),
        max_length=255,
        blank=True,
        default="",
        db_default="",
        help_text=_("Исполнитель Celery (имя хоста), взявший запуск; сборщик зависших спрашивает, жив ли он."),
    )

    class Meta:
        db_table = "agent_runs"
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["agent", "-id"], name="agents_agentrun_agent_idx"),
            # The weekly budget sums tokens by finished_at per owner's agents.
            models.Index(
                fields=["agent", "finished_at"],
                name="agents_agentrun_finished_idx",
                condition=Q(finished_at__isnull=False),
            ),
            # The reaper and the re-dispatcher scan only active runs.
            models.Index(
                fields=["state", "heartbeat_at"],
                name="agents_agentrun_active_idx",
                condition=Q(state__in=["queued", "running"]),
            ),
        ]
        constraints = [
            # Single-flight: a manual run racing a scheduled slot is settled here, not in code.
            models.UniqueConstraint(
                fields=["agent"],
                condition=Q(state__in=["queued", "running"]),
                name="agents_agentrun_one_active_per_agent",
                violation_error_message="The agent already has a queued or running run.",
            ),
            models.CheckConstraint(
                condition=~Q(state="skipped") | Q(started_at__isnull=True, tokens_used=0),
                name="agents_agentrun_skipped_never_started",
                violation_error_message="A skipped run was refused before it started.",
            ),
            models.CheckConstraint(
                condition=Q(trigger__in=["manual", "scheduled", "event"]),
                name="agents_agentrun_trigger_valid",
                violation_error_message="A run is manual, scheduled or started by an event.",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["queued", "running", "succeeded", "failed", "skipped"]),
                name="agents_agentrun_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["queued", "running"]) | Q(finished_at__isnull=False),
                name="agents_agentrun_finished_when_done",
            ),
            models.CheckConstraint(
                condition=~Q(state="running") | Q(started_at__isnull=False), name="agents_agentrun_running_has_started"
            ),
            # A split is whole or absent, and adds up to the total the budget counts.
            models.CheckConstraint(
                condition=Q(input_tokens__isnull=True, output_tokens__isnull=True)
                | Q(
                    input_tokens__isnull=False,
                    output_tokens__isnull=False,
                    tokens_used=models.F("input_tokens") + models.F("output_tokens"),
                ),
                name="agents_agentrun_split_adds_up",
                violation_error_message="input_tokens + output_tokens is tokens_used.",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of agent {self.agent_id} ({self.state})"


EVENT_KINDS = [k.value for k in JiraEventKind]
MAX_DEBOUNCE_SECONDS = 3600


class AgentSubscription(TimestampedModel):
    """An agent's interest in hub events: a Jira issue created, updated or transitioned in the mirror,
    matching every filter that is set (an empty filter matches anything)."""

    # ON DELETE at DB level (migration 0011), as for runs: CASCADE from the agent.
    agent = models.ForeignKey(Agent, on_delete=models.DO_NOTHING, related_name="subscriptions", db_index=False)
    events = ArrayField(
        models.CharField(max_length=16, choices=JiraEventKind.choices),
        help_text="Which kinds of change wake the agent: created, updated, transitioned.",
    )
    project = models.CharField(max_length=32, blank=True, default="", help_text="Jira project key; empty = any.")
    issue_type = models.CharField(max_length=100, blank=True, default="", help_text="Issue type; empty = any.")
    status = models.CharField(
        max_length=100, blank=True, default="", help_text="The status the issue is in after the change; empty = any."
    )
    label = models.CharField(
        max_length=255, blank=True, default="", help_text="A label the issue carries; empty = any."
    )
    debounce_seconds = models.PositiveIntegerField(
        default=60, help_text="Changes to one issue within this quiet period make one run."
    )

    class Meta:
        db_table = "agent_subscriptions"
        ordering = ["id"]
        indexes = [models.Index(fields=["agent"], name="agents_subscription_agent_idx")]
        constraints = [
            # An empty list would be a subscription that can never fire; an unknown kind, one that never will.
            models.CheckConstraint(
                condition=Q(events__len__gt=0) & Q(events__contained_by=EVENT_KINDS),
                name="agents_subscription_events_valid",
                violation_error_message="A subscription names at least one of created, updated, transitioned.",
            ),
            models.CheckConstraint(
                condition=Q(debounce_seconds__lte=MAX_DEBOUNCE_SECONDS),
                name="agents_subscription_debounce_bounded",
                violation_error_message="The debounce is at most an hour.",
            ),
        ]

    def __str__(self) -> str:
        return f"subscription {self.pk} of agent {self.agent_id}"


class AgentEvent(TimestampedModel):
    """A matching change waiting to start a run (``run`` NULL, due at ``fire_at``), or the one it started.

    A burst of changes to one issue is one pending row (the partial UNIQUE): each change merges into
    it and moves ``fire_at`` on by the subscription's debounce."""

    # ON DELETE at DB level (migration 0011): CASCADE from the agent and the run, SET NULL from the subscription.
    agent = models.ForeignKey(Agent, on_delete=models.DO_NOTHING, related_name="events", db_index=False)
    subscription = models.ForeignKey(
        AgentSubscription, on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+", db_index=False
    )
    run = models.ForeignKey(AgentRun, on_delete=models.DO_NOTHING, null=True, blank=True, related_name="events")
    issue_key = models.CharField(max_length=64)
    kinds = ArrayField(models.CharField(max_length=16, choices=JiraEventKind.choices))
    changes = models.JSONField(default=dict, blank=True, help_text="field → [before, after] over the burst")
    hits = models.PositiveIntegerField(default=1, help_text="How many mirror changes this row coalesces.")
    fire_at = models.DateTimeField(help_text="When the debounce ends and the event may start a run.")

    class Meta:
        db_table = "agent_events"
        ordering = ["id"]
        indexes = [
            # The tick's scan reads only what is still waiting.
            models.Index(fields=["fire_at"], name="agents_event_due_idx", condition=Q(run__isnull=True)),
            models.Index(fields=["agent", "issue_key"], name="agents_event_agent_issue_idx"),
        ]
        constraints = [
            # Debounce, settled by the database: two uploads racing on one issue merge, never fire twice.
            models.UniqueConstraint(
                fields=["agent", "issue_key"],
                condition=Q(run__isnull=True),
                name="agents_event_one_pending_per_issue",
                violation_error_message="The agent already has a pending event for this issue.",
            ),
            models.CheckConstraint(
                condition=Q(kinds__len__gt=0) & Q(kinds__contained_by=EVENT_KINDS),
                name="agents_event_kinds_valid",
                violation_error_message="An event is created, updated or transitioned.",
            ),
            models.CheckConstraint(
                condition=Q(issue_key__regex=r"^[A-Z][A-Z0-9_]*-[0-9]+$"),
                name="agents_event_issue_key_format",
                violation_error_message="A Jira key looks like PROJ-123.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.issue_key} {'/'.join(self.kinds)} for agent {self.agent_id}"


__all__ = ["Agent", "AgentEvent", "AgentRun", "AgentSubscription", "RunReason", "RunState", "RunTrigger"]
