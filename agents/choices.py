"""Vocabulary of the Agent Engine: run triggers, run states and the reasons a run ends or is refused."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class RunTrigger(models.TextChoices):
    MANUAL = "manual", _("вручную")
    SCHEDULED = "scheduled", _("по расписанию")
    EVENT = "event", _("по событию")


class RunState(models.TextChoices):
    QUEUED = "queued", _("в очереди")
    RUNNING = "running", _("выполняется")
    SUCCEEDED = "succeeded", _("выполнен")
    FAILED = "failed", _("ошибка")
    SKIPPED = "skipped", _("пропущен")


ACTIVE_STATES = (RunState.QUEUED, RunState.RUNNING)


class RunReason(models.TextChoices):
    # skipped: refused at runtime, never started
    ALREADY_RUNNING = "already_running", _("предыдущий запуск ещё идёт")
    BUDGET_EXCEEDED = "budget_exceeded", _("недельный бюджет токенов исчерпан")
    GATE_CLOSED = "gate_closed", _("агент выключен или приостановлен до старта")
    # failed: started, then stopped
    ITERATION_CAP = "iteration_cap", _("достигнут предел шагов")
    STALE = "stale", _("исполнитель перестал отвечать")
    WORKER_LOST = "worker_lost", _("исполнитель остановился")
    TOKEN_CAP = "token_cap", _("достигнут предел токенов на запуск")
    MODEL_ERROR = "model_error", _("модель недоступна")
    ERROR = "error", _("внутренняя ошибка")


class AgentStatus(models.TextChoices):
    """The one-word summary shown in the admin registry and the API."""

    PAUSED_BY_ADMIN = "paused_by_admin", _("приостановлен администратором")
    DISABLED = "disabled", _("выключен")
    NO_MODEL = "no_model", _("нет модели")
    RUNNING = "running", _("выполняется")
    QUEUED = "queued", _("в очереди")
    SCHEDULED = "scheduled", _("по расписанию")
    MANUAL_ONLY = "manual_only", _("вручную")


class JiraEventKind(models.TextChoices):
    """What happened to an issue in the hub's Jira mirror (``achilles.hooks.jira_issues_changed``)."""

    CREATED = "created", "created"
    UPDATED = "updated", "updated"
    TRANSITIONED = "transitioned", "transitioned"
