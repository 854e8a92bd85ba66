"""Tables of the hub (SPEC §6): the Jira mirror, notes, command batches, sync agents, publications,
settings.

The invariants live in the database (migrations 0001/0002): command states and leases by CHECK,
seq unique per batch, `$N` dependencies only on earlier commands, one token per issued lease,
a mirror row never moved back to an older Jira ``updated`` (trigger), a publication's sha256 equal
to its bytes' digest, a monotonic ``settings_version`` (trigger), FK actions ON DELETE at DB level.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now, Upper
from django.utils.translation import gettext_lazy as _

from achilles.models import User
from syncagent.command_types import COMMAND_TYPES

KEY_RE = r"^[A-Z][A-Z0-9_]*-[0-9]+$"
PROJECT_RE = r"^[A-Z][A-Z0-9_]*$"
COMMAND_STATES = ("queued", "claimed", "done", "failed", "cancelled")
UPDATE_STATES = ("idle", "downloading", "starting", "done", "rolled_back", "failed")
SYNC_RUN_KINDS = ("incremental", "full", "refresh")
SYNC_RUN_STATUSES = ("running", "ok", "failed")
LINK_DIRECTIONS = ("outward", "inward")
COMMAND_STATE_CHOICES = [
    ("queued", _("в очереди")),
    ("claimed", _("у агента")),
    ("done", _("выполнена")),
    ("failed", _("ошибка")),
    ("cancelled", _("отменена")),
]
SYNC_RUN_KIND_CHOICES = [("incremental", _("инкрементальная")), ("full", _("полная")), ("refresh", _("обновление"))]
SYNC_RUN_STATUS_CHOICES = [("running", _("выполняется")), ("ok", _("успешно")), ("failed", _("ошибка"))]


class MirrorIssue(models.Model):
    """A Jira issue as the sync agent last uploaded it (HUB-1); written only by uploads."""

    key = models.CharField(_("ключ"), max_length=64, unique=True)
    project = models.CharField(_("проект"), max_length=32)
    summary = models.TextField(_("тема"), default="", blank=True)
    status = models.CharField(_("статус"), max_length=100, default="", blank=True)
    issue_type = models.CharField(_("тип задачи"), max_length=100, default="", blank=True)
    priority = models.CharField(_("приоритет"), max_length=100, default="", blank=True)
    assignee = models.CharField(_("исполнитель задачи"), max_length=200, default="", blank=True)
    duedate = models.DateField(_("срок"), null=True, blank=True)
    sprint = models.CharField(_("спринт"), max_length=200, default="", blank=True)
    labels = ArrayField(models.CharField(max_length=255), verbose_name=_("метки"), default=list, blank=True)
    description = models.TextField(_("описание"), default="", blank=True)
    fields = models.JSONField(
        _("поля Jira"), default=dict, blank=True, help_text=_("Поля Jira как есть, как их выгрузили.")
    )
    updated = models.DateTimeField(
        _("изменена в Jira"), help_text=_("Поле Jira <code>updated</code> выгруженной версии.")
    )
    content_sha256 = models.CharField(
        _("хеш содержимого (SHA-256)"),
        max_length=64,
        help_text=_("Хеш выгруженной записи страницы: совпал — без изменений."),
    )
    mirrored_at = models.DateTimeField(_("отражена"), db_default=Now())

    class Meta:
        db_table = "hub_issues"
        ordering = ["key"]
        permissions = [("use_hub", "Can use the hub (mirror, notes, batches)")]
        indexes = [
            # HUB-3 filters compare case-insensitively (UPPER(col) = UPPER(value)): the indexes are on
            # the same expressions, so PostgreSQL can combine them (bitmap AND) for any mix of filters.
            models.Index(fields=["project", "updated"], name="hub_issue_project_updated_idx"),
            models.Index(Upper("status"), name="hub_issue_status_idx"),
            models.Index(Upper("assignee"), name="hub_issue_assignee_idx"),
            models.Index(Upper("sprint"), name="hub_issue_sprint_idx"),
            GinIndex(fields=["labels"], name="hub_issue_labels_idx"),
            models.Index(fields=["project", "duedate"], name="hub_issue_project_duedate_idx"),
            models.Index(fields=["duedate"], name="hub_issue_duedate_idx"),
            models.Index(fields=["updated"], name="hub_issue_updated_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(key__regex=KEY_RE),
                name="hub_mirrorissue_key_format",
                violation_error_message="A Jira key looks like PROJ-123.",
            ),
            models.CheckConstraint(condition=Q(project__regex=PROJECT_RE), name="hub_mirrorissue_project_format"),
            models.CheckConstraint(
                condition=Q(content_sha256__regex=r"^[0-9a-f]{64}$"), name="hub_mirrorissue_sha256_hex"
            ),
        ]

    def __str__(self) -> str:
        return self.key


class MirrorLink(models.Model):
    """An issue link as Jira shows it on ``issue`` (HUB-1); replaced with every upload of the issue."""

    issue = models.ForeignKey(MirrorIssue, verbose_name=_("задача"), on_delete=models.DO_NOTHING, related_name="links")
    link_type = models.CharField(_("тип связи"), max_length=100)
    direction = models.CharField(_("направление"), max_length=8)
    other_key = models.CharField(_("другая задача"), max_length=64)

    class Meta:
        db_table = "hub_issue_links"
        indexes = [models.Index(fields=["other_key"], name="hub_link_other_key_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["issue", "link_type", "direction", "other_key"], name="hub_mirrorlink_unique"
            ),
            models.CheckConstraint(condition=Q(direction__in=LINK_DIRECTIONS), name="hub_mirrorlink_direction_valid"),
            models.CheckConstraint(condition=Q(other_key__regex=KEY_RE), name="hub_mirrorlink_other_key_format"),
            models.CheckConstraint(condition=~Q(link_type=""), name="hub_mirrorlink_type_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.link_type} {self.direction} {self.other_key}"


class MirrorComment(models.Model):
    """A Jira comment of a mirrored issue (HUB-1); replaced with every upload of the issue."""

    issue = models.ForeignKey(
        MirrorIssue, verbose_name=_("задача"), on_delete=models.DO_NOTHING, related_name="comments"
    )
    jira_id = models.CharField(_("ID в Jira"), max_length=64)
    author = models.CharField(_("автор"), max_length=200, default="", blank=True)
    created = models.DateTimeField(_("создан"), null=True, blank=True)
    body = models.TextField(_("текст"), default="", blank=True)

    class Meta:
        db_table = "hub_issue_comments"
        indexes = [models.Index(fields=["issue", "created"], name="hub_comment_issue_created_idx")]
        constraints = [
            models.UniqueConstraint(fields=["issue", "jira_id"], name="hub_mirrorcomment_unique"),
            models.CheckConstraint(condition=~Q(jira_id=""), name="hub_mirrorcomment_jira_id_not_empty"),
        ]

    def __str__(self) -> str:
        return f"comment {self.jira_id}"


class IssueNote(models.Model):
    """Hub-local notes of an issue (HUB-2), never sent to Jira."""

    issue = models.OneToOneField(
        MirrorIssue, verbose_name=_("задача"), on_delete=models.DO_NOTHING, related_name="notes"
    )
    fact_status = models.CharField(_("фактический статус"), max_length=200, default="", blank=True)
    note = models.TextField(_("заметка"), default="", blank=True)
    next_step = models.TextField(_("следующий шаг"), default="", blank=True)
    owner = models.CharField(_("владелец"), max_length=200, default="", blank=True)
    updated_by = models.ForeignKey(
        User, verbose_name=_("кем изменено"), on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(_("изменено"), db_default=Now())

    class Meta:
        db_table = "hub_notes"
        indexes = [models.Index(Upper("fact_status"), name="hub_note_fact_status_idx")]

    def __str__(self) -> str:
        return f"notes of issue {self.issue_id}"


class Batch(models.Model):
    """A titled group of commands created at once (HUB-6); finished when every command is final."""

    title = models.CharField(_("заголовок"), max_length=300)
    author = models.CharField(
        _("автор"), max_length=64, help_text=_("<code>claude</code> — из MCP, <code>api</code> — из REST без автора.")
    )
    # Who created it (REST, MCP, admin): ON DELETE SET NULL in the database (migration 0002) — deleting
    # a person keeps their batches (and the audit trail keeps their name); an ownerless batch is then
    # visible only to staff and holders of hub.view_batch / hub.manage_any_batch.
    created_by = models.ForeignKey(
        User,
        verbose_name=_("кем создан"),
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="hub_batches",
        help_text=_("Кто создал пакет; пусто, если этого пользователя удалили."),
    )
    created_at = models.DateTimeField(_("создано"), db_default=Now())
    finished_at = models.DateTimeField(_("закончен"), null=True, blank=True)
    retry_of = models.ForeignKey(
        "Command",
        verbose_name=_("повтор команды"),
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="retries",
    )

    class Meta:
        db_table = "hub_batches"
        ordering = ["-id"]
        permissions = [
            ("manage_any_batch", "Can cancel, force-cancel and retry anyone's hub batches and commands"),
            ("name_batch_author", "Can name the author of a hub batch (service accounts)"),
        ]
        # A person's own batches, newest first (the list a non-staff user gets).
        indexes = [models.Index(fields=["created_by", "-id"], name="hub_batch_created_by_idx")]
        constraints = [
            models.CheckConstraint(condition=~Q(title=""), name="hub_batch_title_not_empty"),
            models.CheckConstraint(condition=Q(author__regex=r"^[a-z0-9_.@-]{1,64}$"), name="hub_batch_author_format"),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True) | Q(finished_at__gte=models.F("created_at")),
                name="hub_batch_finished_after_created",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.title}"


class Command(models.Model):
    """One idempotent command of a batch (HUB-5/7): queued → claimed (lease) → done | failed,
    queued | claimed (forced) → cancelled."""

    batch = models.ForeignKey(Batch, verbose_name=_("пакет"), on_delete=models.DO_NOTHING, related_name="commands")
    seq = models.PositiveIntegerField(
        _("номер в пакете"), help_text=_("Номер в пакете с 1; <code>$N</code> ссылается на команду с номером N.")
    )
    type = models.CharField(_("тип"), max_length=32)
    payload = models.JSONField(_("содержимое команды"), help_text=_("Команда после проверки (в форме контракта)."))
    keys = ArrayField(
        models.CharField(max_length=64),
        verbose_name=_("ключи задач"),
        default=list,
        blank=True,
        help_text=_("Ключи задач, которых касается команда (<code>$N</code>, пока не известны)."),
    )
    depends_on = ArrayField(
        models.PositiveIntegerField(),
        verbose_name=_("зависит от"),
        default=list,
        blank=True,
        help_text=_(
            "Номера более ранних команд <code>ensure_issue</code>, на которые эта ссылается как <code>$N</code>."
        ),
    )
    waits_for_batch = models.BooleanField(
        _("ждёт весь пакет"),
        default=False,
        help_text=_("Выдаётся только после того, как все остальные команды завершены."),
    )
    state = models.CharField(_("состояние"), max_length=16, default="queued", choices=COMMAND_STATE_CHOICES)
    claims = models.PositiveIntegerField(_("взята раз"), default=0)
    lease_token = models.CharField(_("токен аренды"), max_length=64, null=True, blank=True)
    lease_tokens = ArrayField(
        models.CharField(max_length=64),
        verbose_name=_("токены аренды"),
        default=list,
        blank=True,
        help_text=_("Все когда-либо выданные аренды этой команды, от старых к новым."),
    )
    lease_expires_at = models.DateTimeField(_("аренда истекает"), null=True, blank=True)
    claimed_at = models.DateTimeField(_("взята"), null=True, blank=True)
    claimed_by = models.ForeignKey(
        "SyncAgent", verbose_name=_("кем взята"), on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+"
    )
    finished_at = models.DateTimeField(_("закончен"), null=True, blank=True)
    finished_lease_token = models.CharField(_("токен завершившей аренды"), max_length=64, null=True, blank=True)
    result = models.JSONField(_("итог"), null=True, blank=True)
    error = models.TextField(_("ошибка"), default="", blank=True)
    created_key = models.CharField(_("созданная задача"), max_length=64, default="", blank=True)
    force_cancelled = models.BooleanField(_("отменена принудительно"), default=False)
    cancel_notified_at = models.DateTimeField(_("агент узнал об отмене"), null=True, blank=True)
    created_at = models.DateTimeField(_("создано"), db_default=Now())

    class Meta:
        db_table = "hub_commands"
        ordering = ["batch_id", "seq"]
        indexes = [
            # The claim scan reads only open commands, in batch order.
            models.Index(
                fields=["batch", "seq"], name="hub_command_open_idx", condition=Q(state__in=["queued", "claimed"])
            ),
            models.Index(fields=["lease_expires_at"], name="hub_command_lease_idx", condition=Q(state="claimed")),
            models.Index(
                fields=["claimed_by"],
                name="hub_command_cancel_notify_idx",
                condition=Q(force_cancelled=True, cancel_notified_at__isnull=True),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["batch", "seq"], name="hub_command_seq_unique_per_batch"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="hub_command_seq_positive"),
            models.CheckConstraint(condition=Q(type__in=COMMAND_TYPES), name="hub_command_type_valid"),
            models.CheckConstraint(condition=Q(state__in=COMMAND_STATES), name="hub_command_state_valid"),
            # A claimed command holds exactly one live lease; no other state holds one.
            models.CheckConstraint(
                condition=(
                    Q(
                        state="claimed",
                        lease_token__isnull=False,
                        lease_expires_at__isnull=False,
                        claimed_at__isnull=False,
                        claims__gte=1,
                    )
                    | (~Q(state="claimed") & Q(lease_token__isnull=True, lease_expires_at__isnull=True))
                ),
                name="hub_command_lease_iff_claimed",
            ),
            models.CheckConstraint(
                condition=(
                    Q(state__in=["done", "failed", "cancelled"], finished_at__isnull=False)
                    | Q(state__in=["queued", "claimed"], finished_at__isnull=True)
                ),
                name="hub_command_finished_iff_final",
            ),
            models.CheckConstraint(
                condition=~Q(state="done") | Q(result__isnull=False), name="hub_command_done_has_result"
            ),
            models.CheckConstraint(condition=~Q(state="failed") | ~Q(error=""), name="hub_command_failed_has_error"),
            models.CheckConstraint(
                condition=~Q(force_cancelled=True) | Q(state="cancelled"), name="hub_command_forced_is_cancelled"
            ),
            models.CheckConstraint(
                condition=Q(cancel_notified_at__isnull=True) | Q(force_cancelled=True),
                name="hub_command_notified_only_if_forced",
            ),
            # claims counts the leases issued; the live lease is the newest one.
            models.CheckConstraint(
                condition=Q(claims=models.Func(models.F("lease_tokens"), function="cardinality")),
                name="hub_command_claims_match_leases",
            ),
            models.CheckConstraint(
                condition=Q(finished_lease_token__isnull=True) | Q(state__in=["done", "failed"]),
                name="hub_command_finished_lease_only_when_reported",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.type}"


class SyncAgent(models.Model):
    """An on-prem sync agent: its own token scope (``achsync_…``), usable only on the protocol routes."""

    name = models.CharField(_("название"), max_length=100, unique=True)
    token_prefix = models.CharField(_("префикс токена"), max_length=16)
    token_hash = models.CharField(_("хеш токена"), max_length=64, unique=True)
    created_at = models.DateTimeField(_("создано"), db_default=Now())
    revoked_at = models.DateTimeField(_("отозван"), null=True, blank=True)

    class Meta:
        db_table = "hub_sync_agents"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(name__regex=r"^[A-Za-z0-9_.-]{1,100}$"), name="hub_syncagent_name_format"
            ),
            models.CheckConstraint(
                condition=Q(token_hash__regex=r"^[0-9a-f]{64}$"), name="hub_syncagent_token_hash_hex"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class SyncAgentContact(models.Model):
    """What a sync agent said on its latest claim (HUB-11/12): versions, update state, contact times."""

    sync_agent = models.OneToOneField(
        SyncAgent,
        verbose_name=_("агент синхронизации"),
        on_delete=models.DO_NOTHING,
        primary_key=True,
        related_name="contact",
    )
    last_contact_at = models.DateTimeField(_("последняя связь"))
    last_claim_at = models.DateTimeField(_("последний запрос команд"))
    version = models.PositiveIntegerField(_("версия"))
    launcher_version = models.PositiveIntegerField(
        _("версия загрузчика"), null=True, blank=True, help_text=_("Пусто — работает без загрузчика.")
    )
    settings_version = models.PositiveIntegerField(_("версия настроек"), null=True, blank=True)
    update_state = models.CharField(_("состояние обновления"), max_length=16, null=True, blank=True)
    update_from = models.PositiveIntegerField(_("обновление с версии"), null=True, blank=True)
    update_to = models.PositiveIntegerField(_("обновление до версии"), null=True, blank=True)
    update_error = models.TextField(_("ошибка обновления"), default="", blank=True)

    class Meta:
        db_table = "hub_sync_agent_contacts"
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="hub_syncagentcontact_version_positive"),
            models.CheckConstraint(
                condition=Q(launcher_version__isnull=True) | Q(launcher_version__gte=1),
                name="hub_syncagentcontact_launcher_version_positive",
            ),
            models.CheckConstraint(
                condition=Q(update_state__isnull=True) | Q(update_state__in=UPDATE_STATES),
                name="hub_syncagentcontact_update_state_valid",
            ),
            models.CheckConstraint(
                condition=~Q(update_state__isnull=True) | (Q(update_from__isnull=True) & Q(update_to__isnull=True)),
                name="hub_syncagentcontact_update_versions_need_state",
            ),
        ]

    def __str__(self) -> str:
        return f"contact of sync agent {self.sync_agent_id}"


class RateLimitEvent(models.Model):
    """A 429 Jira answered the sync agent (HUB-12 «429 за сутки»)."""

    sync_agent = models.ForeignKey(
        SyncAgent, verbose_name=_("агент синхронизации"), on_delete=models.DO_NOTHING, related_name="+"
    )
    at = models.DateTimeField(_("когда"))
    retry_after_seconds = models.FloatField(_("повтор через, с"), default=0)
    path = models.CharField(_("путь"), max_length=500, default="", blank=True)

    class Meta:
        db_table = "hub_rate_limit_events"
        indexes = [models.Index(fields=["at"], name="hub_ratelimit_at_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(retry_after_seconds__gte=0), name="hub_ratelimitevent_retry_after_nonnegative"
            ),
            models.UniqueConstraint(fields=["sync_agent", "at", "path"], name="hub_ratelimitevent_unique"),
        ]

    def __str__(self) -> str:
        return f"429 at {self.at:%Y-%m-%d %H:%M:%S}"


class SyncRun(models.Model):
    """One mirror sync the sync agent ran (HUB-14)."""

    sync_agent = models.ForeignKey(
        SyncAgent,
        verbose_name=_("агент синхронизации"),
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="+",
    )
    kind = models.CharField(_("вид"), max_length=16, choices=SYNC_RUN_KIND_CHOICES)
    status = models.CharField(_("статус"), max_length=16, default="running", choices=SYNC_RUN_STATUS_CHOICES)
    started_at = models.DateTimeField(_("начат"), db_default=Now())
    finished_at = models.DateTimeField(_("закончен"), null=True, blank=True)
    counts = models.JSONField(_("счётчики"), default=dict, blank=True)
    errors = models.JSONField(_("ошибки"), default=list, blank=True)

    class Meta:
        db_table = "hub_sync_runs"
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=SYNC_RUN_KINDS), name="hub_syncrun_kind_valid"),
            models.CheckConstraint(condition=Q(status__in=SYNC_RUN_STATUSES), name="hub_syncrun_status_valid"),
            models.CheckConstraint(
                condition=(
                    Q(status="running", finished_at__isnull=True)
                    | (~Q(status="running") & Q(finished_at__isnull=False))
                ),
                name="hub_syncrun_finished_iff_not_running",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.kind} {self.status}"


class Publication(models.Model):
    """A published sync-agent version (HUB-13): the artifact's bytes and their sha256."""

    version = models.PositiveIntegerField(_("версия"), unique=True)
    artifact = models.BinaryField(_("архив"))
    sha256 = models.CharField(_("SHA-256"), max_length=64)
    size = models.PositiveIntegerField(_("размер"))
    notes = models.TextField(_("примечания"), default="", blank=True)
    published_at = models.DateTimeField(_("опубликована"), db_default=Now())
    published_by = models.ForeignKey(
        User, verbose_name=_("кем опубликована"), on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+"
    )

    class Meta:
        db_table = "hub_publications"
        ordering = ["-version"]
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="hub_publication_version_positive"),
        ]

    def __str__(self) -> str:
        return f"v{self.version}"


class HubSetting(models.Model):
    """One hub setting (HUB-15); validated per key by ``hub.settings_schema``."""

    key = models.CharField(_("ключ"), max_length=64, primary_key=True)
    value = models.JSONField(_("значение"))
    updated_at = models.DateTimeField(_("изменено"), db_default=Now())
    updated_by = models.ForeignKey(
        User, verbose_name=_("кем изменено"), on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+"
    )

    class Meta:
        db_table = "hub_settings"
        ordering = ["key"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    key__in=[
                        "base_label",
                        "poll_interval_seconds",
                        "lease_seconds",
                        "full_sync_cron",
                        "projects",
                        "project_acl",
                        "sync_overlap_minutes",
                        "page_size",
                    ]
                ),
                name="hub_hubsetting_key_known",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class HubState(models.Model):
    """The hub's singleton row: the monotonic ``settings_version`` (trigger refuses a decrease)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    settings_version = models.PositiveIntegerField(default=1)

    class Meta:
        db_table = "hub_state"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="hub_hubstate_singleton"),
            models.CheckConstraint(condition=Q(settings_version__gte=1), name="hub_hubstate_settings_version_positive"),
        ]

    def __str__(self) -> str:
        return f"hub state (settings v{self.settings_version})"
