"""Vocabulary of the Agent Engine: run triggers, run states and the reasons a run ends or is refused."""

from django.db import models


class RunTrigger(models.TextChoices):
    MANUAL = "manual", "manual"
    SCHEDULED = "scheduled", "scheduled"
    EVENT = "event", "event"


class RunState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    SKIPPED = "skipped", "skipped"


ACTIVE_STATES = (RunState.QUEUED, RunState.RUNNING)


class RunReason(models.TextChoices):
    # skipped: refused at runtime, never started
    ALREADY_RUNNING = "already_running", "already running"
    BUDGET_EXCEEDED = "budget_exceeded", "weekly budget exceeded"
    GATE_CLOSED = "gate_closed", "a gate closed before the run started"
    # failed: started, then stopped
    ITERATION_CAP = "iteration_cap", "iteration cap reached"
    STALE = "stale", "heartbeat went stale"
    WORKER_LOST = "worker_lost", "the worker running it died"
    TOKEN_CAP = "token_cap", "per-run token cap reached"
    MODEL_ERROR = "model_error", "model provider failed"
    ERROR = "error", "unexpected error"


class AgentStatus(models.TextChoices):
    """The one-word summary shown in the admin registry and the API."""

    PAUSED_BY_ADMIN = "paused_by_admin", "paused by admin"
    DISABLED = "disabled", "disabled by owner"
    NO_MODEL = "no_model", "no model"
    RUNNING = "running", "running"
    QUEUED = "queued", "queued"
    SCHEDULED = "scheduled", "scheduled"
    MANUAL_ONLY = "manual_only", "manual only"


class JiraEventKind(models.TextChoices):
    """What happened to an issue in the hub's Jira mirror (``achilles.hooks.jira_issues_changed``)."""

    CREATED = "created", "created"
    UPDATED = "updated", "updated"
    TRANSITIONED = "transitioned", "transitioned"
