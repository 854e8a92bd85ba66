"""Tables of the connectors (part of the Knowledge Store): a source's configuration, its runs, their errors.

Imported by ``knowledge.models`` (app label ``knowledge``). The database holds the invariants:
unique names, known kinds and states, non-negative counters, a terminal run has its end time and
only a terminal one, and at most one active (queued or running) run per connector and run kind.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from achilles.models import TimestampedModel

CONNECTOR_URL_PATTERN = r"^https?://[^\s/?#]+[^\s]*$"


class ConnectorKind(models.TextChoices):
    CONFLUENCE = "confluence", "Confluence Server / Data Center"


class RunKind(models.TextChoices):
    CONTENT = "content", _("синхронизация содержимого")
    PERMISSIONS = "permissions", _("синхронизация прав")


class RunState(models.TextChoices):
    QUEUED = "queued", _("в очереди")
    RUNNING = "running", _("выполняется")
    SUCCEEDED = "succeeded", _("успешно")
    FAILED = "failed", _("ошибка")
    CANCELLED = "cancelled", _("отменён")


ACTIVE_RUN_STATES = (RunState.QUEUED, RunState.RUNNING)
TERMINAL_RUN_STATES = (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED)


class Connector(TimestampedModel):
    """A source the store pulls from: kind, address, encrypted credentials, scope and schedules."""

    kind = models.CharField(_("вид"), max_length=32, choices=ConnectorKind.choices)
    name = models.CharField(_("название"), max_length=100, unique=True)
    base_url = models.CharField(_("адрес сервера"), max_length=2000)
    # Fernet token of the credentials (knowledge.connectors.secrets); never returned after saving.
    credentials_encrypted = models.TextField(blank=True, default="", editable=False)
    scope = models.JSONField(
        _("что синхронизировать"),
        default=dict,
        blank=True,
        help_text=_('Что синхронизировать, например {"spaces": ["ENG", "HR"]}.'),
    )
    schedule_minutes = models.PositiveIntegerField(
        _("синхронизация содержимого, мин"), default=60, help_text=_("Синхронизация содержимого каждые столько минут.")
    )
    permission_sync_minutes = models.PositiveIntegerField(
        _("синхронизация прав, мин"),
        default=15,
        help_text=_("Права пространств и ограничения страниц перечитываются каждые столько минут."),
    )
    enabled = models.BooleanField(_("включён"), default=True)
    last_content_sync_at = models.DateTimeField(_("последняя синхронизация содержимого"), null=True, blank=True)
    last_permission_sync_at = models.DateTimeField(_("последняя синхронизация прав"), null=True, blank=True)

    class Meta:
        db_table = "knowledge_connectors"
        app_label = "knowledge"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=ConnectorKind.values),
                name="knowledge_connector_kind_known",
                violation_error_message="Unknown connector kind.",
            ),
            models.CheckConstraint(
                condition=~Q(name__regex=r"^\s*$"),
                name="knowledge_connector_name_not_blank",
                violation_error_message="A connector needs a name.",
            ),
            models.CheckConstraint(
                condition=Q(base_url__iregex=CONNECTOR_URL_PATTERN),
                name="knowledge_connector_base_url_http",
                violation_error_message="The base URL must be an http(s) address.",
            ),
            # A schedule of zero would dispatch a run on every tick.
            models.CheckConstraint(
                condition=Q(schedule_minutes__gte=1, permission_sync_minutes__gte=1),
                name="knowledge_connector_schedules_positive",
                violation_error_message="Schedules are at least one minute.",
            ),
        ]

    @property
    def source_system(self) -> str:
        """The store's source system of this connector's records (stable across renames)."""
        return f"{self.kind}:{self.pk}"

    def __str__(self) -> str:
        return self.name


class ConnectorRun(TimestampedModel):
    """One sync of a connector: its state, counters, and the checkpoint committed with each batch."""

    connector = models.ForeignKey(Connector, verbose_name=_("коннектор"), on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(_("вид"), max_length=16, choices=RunKind.choices, default=RunKind.CONTENT)
    state = models.CharField(_("состояние"), max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    seen = models.PositiveIntegerField(_("просмотрено"), default=0)
    changed = models.PositiveIntegerField(_("изменено документов"), default=0)
    deleted = models.PositiveIntegerField(_("удалено"), default=0)
    failed = models.PositiveIntegerField(_("с ошибкой"), default=0)
    total = models.PositiveIntegerField(
        _("всего"), null=True, blank=True, help_text=_("Сколько документов источник назвал к обработке.")
    )
    # {"watermark": "<ISO lastmodified>", "start": <page cursor>, "phase": "pages"|"reconcile"}
    checkpoint = models.JSONField(_("точка продолжения"), default=dict, blank=True)
    started_at = models.DateTimeField(_("начат"), null=True, blank=True)
    heartbeat_at = models.DateTimeField(_("последний сигнал"), null=True, blank=True)
    finished_at = models.DateTimeField(_("закончен"), null=True, blank=True)
    error = models.TextField(_("ошибка"), blank=True, default="")
    attempts = models.PositiveIntegerField(
        _("попыток"), default=0, help_text=_("Сколько раз исполнитель брался за синхронизацию (продолжения считаются).")
    )

    class Meta:
        db_table = "knowledge_connector_runs"
        app_label = "knowledge"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=RunState.values),
                name="knowledge_connectorrun_state_known",
                violation_error_message="Unknown run state.",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=RunKind.values),
                name="knowledge_connectorrun_kind_known",
                violation_error_message="Unknown run kind.",
            ),
            models.CheckConstraint(
                condition=(Q(state__in=TERMINAL_RUN_STATES) & Q(finished_at__isnull=False))
                | (Q(state__in=ACTIVE_RUN_STATES) & Q(finished_at__isnull=True)),
                name="knowledge_connectorrun_finished_iff_terminal",
                violation_error_message="A finished run has its end time, and only a finished one.",
            ),
            # Two workers never sync one connector at once: a second trigger gets the active run (409).
            models.UniqueConstraint(
                fields=["connector", "kind"],
                condition=Q(state__in=ACTIVE_RUN_STATES),
                name="knowledge_connectorrun_one_active",
                violation_error_message="This connector already has a run of this kind in progress.",
            ),
        ]
        indexes = [models.Index(fields=["connector", "-created_at"], name="knowledge_connrun_recent_idx")]

    def __str__(self) -> str:
        return f"{self.connector_id} {self.kind} run {self.pk} ({self.state})"


class ConnectorRunError(models.Model):
    """One document a run could not take, and why (the run went on)."""

    run = models.ForeignKey(ConnectorRun, on_delete=models.CASCADE, related_name="errors")
    external_id = models.CharField(max_length=512)
    error = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "knowledge_connector_run_errors"
        app_label = "knowledge"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "external_id"],
                name="knowledge_connectorrunerror_once_per_run",
                violation_error_message="This document's error is already recorded for the run.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.external_id}: {self.error[:80]}"
