"""Platform core tables: users, platform settings, the model allow-list, API tokens."""

from __future__ import annotations

import zoneinfo

from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


def validate_timezone(value: str) -> None:
    if value not in zoneinfo.available_timezones():
        raise ValidationError(_("«%(zone)s» — не название часового пояса IANA") % {"zone": value})


# The interface languages (settings.LANGUAGES); each named in its own language, as a chooser shows them.
LANGUAGE_CHOICES = [("ru", "Русский"), ("en", "English")]


class TimestampedModel(models.Model):
    """Abstract base: ``created_at``/``updated_at`` with database defaults.

    ``updated_at`` is bumped by the ``achilles_bump_updated_at`` trigger on every UPDATE,
    raw SQL included; each concrete table attaches it with ``AttachUpdatedAtTrigger``.
    """

    created_at = models.DateTimeField(_("создано"), db_default=Now(), editable=False)
    updated_at = models.DateTimeField(_("изменено"), db_default=Now(), editable=False)

    class Meta:
        abstract = True


class User(AbstractUser):
    """A person of the organisation; ``timezone`` NULL means the organisation's default."""

    class Source(models.TextChoices):
        LOCAL = "local", _("локальная учётная запись")
        LDAP = "ldap", "LDAP / Active Directory"
        OIDC = "oidc", "OpenID Connect"
        SCIM = "scim", _("SCIM-провизионинг")

    timezone = models.CharField(_("часовой пояс"), max_length=64, null=True, blank=True, validators=[validate_timezone])
    # Where the account comes from: a directory-sourced account's groups (those the mirror filter
    # matches) and its active state follow the directory (achilles.directory).
    source = models.CharField(
        _("источник учётной записи"),
        max_length=16,
        choices=Source.choices,
        default=Source.LOCAL,
        db_default=Source.LOCAL,
    )
    # Set when the directory (not an administrator) switched the account off: only such an account
    # is switched back on when the directory shows the person again.
    directory_deactivated_at = models.DateTimeField(_("выключена каталогом"), null=True, blank=True, editable=False)
    # The person asked for their notices by e-mail too (settings page, PATCH /api/me); sent only
    # when mail is configured (EMAIL_URL or EMAIL_HOST).
    notify_by_email = models.BooleanField(_("уведомлять по почте"), default=False, db_default=False)
    # The interface language the person chose (settings page, PATCH /api/me); empty: the browser's.
    language = models.CharField(
        _("язык интерфейса"), max_length=8, blank=True, default="", db_default="", choices=LANGUAGE_CHOICES
    )

    class Meta:
        db_table = "users"
        constraints = [
            models.CheckConstraint(
                condition=Q(language__in=["", "ru", "en"]),
                name="achilles_user_language_known",
                violation_error_message="the interface language is Russian or English",
            ),
            models.CheckConstraint(
                condition=Q(source__in=["local", "ldap", "oidc", "scim"]),
                name="achilles_user_source_known",
                violation_error_message="an account comes from a known source",
            ),
        ]

    @property
    def principals(self) -> list[str]:
        from achilles.identity import principals_for

        return principals_for(self)

    def effective_timezone(self) -> str:
        from achilles.selectors import effective_timezone

        return effective_timezone(self.timezone)


class PlatformSettings(TimestampedModel):
    """The singleton row of organisation-wide settings (PLAT-4); read via ``platform_settings()``."""

    id = models.PositiveSmallIntegerField(_("ID"), primary_key=True, default=1, editable=False)
    timezone = models.CharField(
        _("часовой пояс"), max_length=64, default="Europe/Moscow", validators=[validate_timezone]
    )
    weekly_token_budget = models.PositiveIntegerField(
        _("недельный бюджет токенов"), default=200_000, help_text=_("На владельца агентов, на неделю.")
    )
    agent_iteration_cap = models.PositiveSmallIntegerField(_("предел шагов агента"), default=8)
    agent_run_token_cap = models.PositiveIntegerField(
        _("предел токенов на запуск агента"),
        default=20_000,
        db_default=20_000,
        help_text=_(
            "Больше всего токенов, которое может потратить один запуск агента; запуск резервирует столько из недельного бюджета."
        ),
    )
    agent_stale_after_seconds = models.PositiveIntegerField(_("запуск агента завис через, с"), default=300)
    platform_prompt = models.TextField(
        _("системный промпт платформы"), blank=True, default="", help_text=_("Пусто → встроенный промпт по умолчанию.")
    )
    web_search_enabled = models.BooleanField(_("поиск в интернете включён"), default=False)
    web_search_url = models.URLField(
        _("адрес поиска в интернете"), blank=True, default="", help_text=_("Адрес, совместимый с SearxNG.")
    )
    answer_reserve_tokens = models.PositiveIntegerField(_("резерв токенов на ответ"), default=1024)
    retrieval_top_k = models.PositiveSmallIntegerField(_("фрагментов в поиске"), default=8)
    cache_ttl_seconds = models.PositiveIntegerField(_("время жизни кэша, с"), default=300)
    currency = models.CharField(
        _("валюта"),
        max_length=8,
        blank=True,
        default="USD",
        db_default="USD",
        help_text=_("Валюта цен в списке разрешённых моделей (в ней «Расходы AI» показывают деньги)."),
    )

    class Meta:
        db_table = "platform_settings"
        verbose_name = "platform settings"
        verbose_name_plural = "platform settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(id=1),
                name="achilles_platformsettings_singleton",
                violation_error_message="There is only one platform settings row.",
            ),
            models.CheckConstraint(
                condition=Q(agent_iteration_cap__gte=1), name="achilles_platformsettings_iteration_cap_positive"
            ),
            models.CheckConstraint(
                condition=Q(retrieval_top_k__gte=1), name="achilles_platformsettings_top_k_positive"
            ),
            models.CheckConstraint(
                condition=Q(agent_run_token_cap__gte=1), name="achilles_platformsettings_run_token_cap_positive"
            ),
        ]

    def __str__(self) -> str:
        return "Platform settings"


class ModelKind(models.TextChoices):
    CHAT = "chat", _("чат")
    EMBEDDING = "embedding", _("эмбеддинги")


class AllowedModel(TimestampedModel):
    """A model on the allow-list (PLAT-5): what agents and conversations may use."""

    name = models.CharField(_("название"), max_length=100, unique=True)
    provider = models.CharField(
        _("провайдер"),
        max_length=32,
        help_text=_("<code>openai</code>, <code>builtin</code>, <code>hash</code> или зарегистрированный провайдер"),
    )
    kind = models.CharField(_("вид"), max_length=16, choices=ModelKind.choices, default=ModelKind.CHAT)
    context_window = models.PositiveIntegerField(_("контекстное окно"), default=8192)
    is_default = models.BooleanField(_("по умолчанию"), default=False)
    options = models.JSONField(
        _("параметры"),
        default=dict,
        blank=True,
        help_text=_(
            'например, <code>{"base_url": "...", "model": "...", "api_key_env": "LLM_API_KEY", "timeout": 60}</code>'
        ),
    )
    # Prices per million tokens in the platform currency; empty = no cost shown for this model.
    input_price_per_mtok = models.DecimalField(
        _("цена за 1 млн входных токенов"),
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text=_("За миллион входных токенов; пусто — стоимость не считается."),
    )
    output_price_per_mtok = models.DecimalField(
        _("цена за 1 млн выходных токенов"),
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text=_("За миллион выходных токенов; пусто — стоимость не считается."),
    )

    class Meta:
        db_table = "agent_models"
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind"],
                condition=Q(is_default=True),
                name="achilles_agentmodel_one_default_per_kind",
                violation_error_message="Only one default model per kind.",
            ),
            models.CheckConstraint(condition=Q(kind__in=["chat", "embedding"]), name="achilles_agentmodel_kind_valid"),
            models.CheckConstraint(condition=Q(context_window__gte=256), name="achilles_agentmodel_context_window_min"),
            models.CheckConstraint(condition=~Q(name=""), name="achilles_agentmodel_name_not_empty"),
            models.CheckConstraint(
                condition=Q(input_price_per_mtok__isnull=True) | Q(input_price_per_mtok__gte=0),
                name="achilles_agentmodel_input_price_not_negative",
                violation_error_message="A price is zero or more.",
            ),
            models.CheckConstraint(
                condition=Q(output_price_per_mtok__isnull=True) | Q(output_price_per_mtok__gte=0),
                name="achilles_agentmodel_output_price_not_negative",
                violation_error_message="A price is zero or more.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def spec(self):
        """The provider layer's view of this row."""
        from achilles.llm.types import ModelSpec

        return ModelSpec(
            name=self.name,
            provider=self.provider,
            kind=self.kind,
            context_window=self.context_window,
            options=dict(self.options or {}),
        )


class ApiToken(TimestampedModel):
    """A personal API token (Bearer). Only a SHA-256 of the secret is stored."""

    user = models.ForeignKey(
        User, verbose_name=_("пользователь"), on_delete=models.DO_NOTHING, related_name="api_tokens"
    )
    name = models.CharField(_("название"), max_length=100, default="token")
    prefix = models.CharField(_("префикс"), max_length=16, db_index=True)
    key_hash = models.CharField(_("хеш ключа"), max_length=64, unique=True)
    last_used_at = models.DateTimeField(_("последнее использование"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("отозван"), null=True, blank=True)

    class Meta:
        db_table = "api_tokens"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class AuditEvent(models.Model):
    """One security-relevant action, append-only (written through ``achilles.audit.audit_record``).

    The database refuses UPDATE and DELETE (trigger ``audit_events_append_only``); the only
    deletion path is the retention job, which names its horizon in the transaction setting
    ``achilles.audit_retention_days`` and may then delete rows older than that, and nothing else.
    The actor is a snapshot (id and username, no foreign key): an FK action would have to rewrite
    the trail when a user is deleted.
    """

    created_at = models.DateTimeField(_("создано"), db_default=Now(), editable=False, db_index=True)
    actor_id = models.BigIntegerField(
        _("ID автора действия"),
        null=True,
        blank=True,
        help_text=_("<code>users.id</code> на тот момент (без внешнего ключа)."),
    )
    actor = models.CharField(
        _("автор действия"),
        max_length=150,
        blank=True,
        default="",
        help_text=_("Имя пользователя на тот момент, или <code>system</code> / <code>anonymous</code>."),
    )
    action = models.CharField(_("действие"), max_length=64)
    target = models.CharField(_("объект"), max_length=500, blank=True, default="")
    details = models.JSONField(_("подробности"), default=dict, blank=True)
    request_id = models.CharField(_("ID запроса"), max_length=100, blank=True, default="")

    class Meta:
        db_table = "audit_events"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(action=""), name="achilles_auditevent_action_not_empty"),
        ]
        indexes = [models.Index(fields=["action", "actor_id", "created_at"], name="audit_action_actor_idx")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor or '-'} {self.action} {self.target}"


class ScimToken(TimestampedModel):
    """A bearer token of an identity provider (Entra ID, Okta, Keycloak) for ``/scim/v2/``.

    Not a person's API token: it authenticates no user and opens nothing under ``/api/``. Only a
    SHA-256 of the secret is stored (``achilles.tokens``); the secret is shown once."""

    name = models.CharField(_("название"), max_length=100)
    prefix = models.CharField(_("префикс"), max_length=16, db_index=True)
    key_hash = models.CharField(_("хеш ключа"), max_length=64, unique=True)
    last_used_at = models.DateTimeField(_("последнее использование"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("отозван"), null=True, blank=True)

    class Meta:
        db_table = "scim_tokens"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(name=""),
                name="achilles_scimtoken_name_not_empty",
                violation_error_message="a token has a name",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class ScimUser(models.Model):
    """The SCIM side of an account the identity provider provisioned: its ``externalId`` and the
    attributes it sent that have no column of their own (phone numbers, addresses, the enterprise
    extension…), returned as they were sent. ``deleted_at``: the provider deleted it — the account
    is switched off and kept (its documents, agents and audit trail), SCIM no longer shows it."""

    user = models.OneToOneField(User, primary_key=True, on_delete=models.CASCADE, related_name="scim")
    external_id = models.CharField(max_length=255, null=True, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    updated_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        db_table = "scim_users"
        constraints = [
            # The provider's own key: two accounts with one externalId would make its lookups ambiguous.
            models.UniqueConstraint(
                fields=["external_id"],
                condition=Q(external_id__isnull=False),
                name="achilles_scimuser_external_id_unique",
                violation_error_message="another account has this externalId",
            ),
            models.CheckConstraint(
                condition=~Q(external_id=""),
                name="achilles_scimuser_external_id_not_empty",
                violation_error_message="an externalId is not empty (no externalId is NULL)",
            ),
        ]

    def __str__(self) -> str:
        return f"SCIM user {self.user_id}"


class ScimGroup(models.Model):
    """A group the identity provider manages through SCIM. SCIM sees and changes only these
    groups (and among their members only SCIM-provisioned accounts): a group made by hand or
    mirrored from LDAP is never touched by it."""

    group = models.OneToOneField("auth.Group", primary_key=True, on_delete=models.CASCADE, related_name="scim")
    external_id = models.CharField(max_length=255, null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    updated_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        db_table = "scim_groups"
        constraints = [
            models.UniqueConstraint(
                fields=["external_id"],
                condition=Q(external_id__isnull=False),
                name="achilles_scimgroup_external_id_unique",
                violation_error_message="another group has this externalId",
            ),
            models.CheckConstraint(
                condition=~Q(external_id=""),
                name="achilles_scimgroup_external_id_not_empty",
                violation_error_message="an externalId is not empty (no externalId is NULL)",
            ),
        ]

    def __str__(self) -> str:
        return f"SCIM group {self.group_id}"


class Notification(models.Model):
    """A notice for one person: an agent run of theirs ended, a batch of theirs finished, a reader asks
    them for access to a source they are the named contact of, a colleague shared a thread with them
    (the bell).

    Written only through ``achilles.notifications.notification_create``; the user FK is ON DELETE
    CASCADE in the database (migration 0013): a person's notices go with them.
    """

    class Kind(models.TextChoices):
        AGENT_RUN = "agent_run", _("запуск агента")
        HUB_BATCH = "hub_batch", _("пакет хаба")
        ACCESS_REQUEST = "access_request", _("запрос доступа")
        THREAD_SHARED = "thread_shared", _("поделились беседой")

    user = models.ForeignKey(User, on_delete=models.DO_NOTHING, related_name="notifications", db_index=False)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True, default="")
    link = models.CharField(max_length=500, blank=True, default="", help_text="A path in the web app.")
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    read_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "notifications"
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["agent_run", "hub_batch", "access_request", "thread_shared"]),
                name="achilles_notification_kind_known",
                violation_error_message="a notice is of a known kind",
            ),
            models.CheckConstraint(
                condition=~Q(title=""),
                name="achilles_notification_title_not_empty",
                violation_error_message="a notice has a title",
            ),
            # a link is a path of this site, never an address elsewhere (the bell renders it as href)
            models.CheckConstraint(
                condition=Q(link="") | Q(link__regex=r"^/[^/\\]"),
                name="achilles_notification_link_local",
                violation_error_message="a notice links to a path of the web app",
            ),
        ]
        indexes = [
            # the bell's list (newest first) and its unread count
            models.Index(fields=["user", "-id"], name="notification_user_idx"),
            models.Index(fields=["user"], condition=Q(read_at__isnull=True), name="notification_unread_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.title}"
