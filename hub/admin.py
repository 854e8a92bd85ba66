"""The hub in the Django admin: the mirror read-only; batches and commands with cancel / force-cancel /
retry through the services; sync agents (token shown once); publications upload; settings; sync runs."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from achilles.errors import ApplicationError
from hub import protocol, services
from hub.hub_settings import SPECS, setting_validate
from hub.models import (
    Batch,
    Command,
    HubSetting,
    IssueNote,
    MirrorComment,
    MirrorIssue,
    MirrorLink,
    Publication,
    RateLimitEvent,
    SyncAgent,
    SyncAgentContact,
    SyncRun,
)
from hub.texts import claimed_command_line


class ReadOnlyMixin:
    """Rows written only by the sync agent or the services: shown, never edited here."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class MirrorLinkInline(ReadOnlyMixin, admin.TabularInline):
    model = MirrorLink
    fields = ("link_type", "direction", "other_key")
    extra = 0


class MirrorCommentInline(ReadOnlyMixin, admin.TabularInline):
    model = MirrorComment
    fields = ("jira_id", "author", "created", "body")
    extra = 0


@admin.register(MirrorIssue)
class MirrorIssueAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("key", "summary", "status", "assignee", "duedate", "sprint", "updated")
    list_filter = ("project", "status", "sprint")
    search_fields = ("key", "summary", "assignee")
    inlines = (MirrorLinkInline, MirrorCommentInline)
    exclude = ("fields",)
    readonly_fields = ("raw_fields",)

    @admin.display(description=_("поля Jira как есть"))
    def raw_fields(self, obj: MirrorIssue) -> str:
        return json.dumps(obj.fields, ensure_ascii=False, indent=1)[:20000]


@admin.register(IssueNote)
class IssueNoteAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("issue", "fact_status", "owner", "next_step", "updated_at", "updated_by")
    search_fields = ("issue__key", "fact_status", "owner")


def _report(request, action: str, done: list[str], errors: list[str]) -> None:
    if done:
        messages.success(request, f"{action}: " + "; ".join(done))
    for error in errors:
        messages.error(request, error)


class CommandInline(ReadOnlyMixin, admin.TabularInline):
    model = Command
    fields = ("seq", "type", "keys", "state", "claims", "error", "finished_at")
    extra = 0
    show_change_link = True


@admin.register(Batch)
class BatchAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "title", "author", "created_by", "created_at", "finished_at")
    search_fields = ("title", "author")
    inlines = (CommandInline,)
    actions = ("cancel_batches",)

    @admin.action(description=_("Отменить команды в очереди у выбранных пакетов"))
    def cancel_batches(self, request, queryset):
        done, errors = [], []
        for batch in queryset:
            try:
                result = services.batch_cancel(user=request.user, batch_id=batch.pk)
            except ApplicationError as exc:
                errors.append(gettext("пакет %(batch)s: %(error)s") % {"batch": batch.pk, "error": exc.detail})
                continue
            done.append(
                gettext("пакет %(batch)s: отменено команд: %(n)s") % {"batch": batch.pk, "n": len(result.cancelled)}
            )
            for command_id in result.claimed:
                messages.warning(request, claimed_command_line(command_id))
        _report(request, gettext("Отмена"), done, errors)


@admin.register(Command)
class CommandAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "batch", "seq", "type", "keys", "state", "claims", "lease_expires_at", "finished_at")
    list_filter = ("state", "type")
    search_fields = ("keys", "error")
    actions = ("cancel_commands", "force_cancel_commands", "retry_commands")

    def _each(self, request, queryset, action: str, call) -> None:
        done, errors = [], []
        for command in queryset:
            try:
                done.append(call(command))
            except ApplicationError as exc:
                errors.append(gettext("команда %(command)s: %(error)s") % {"command": command.pk, "error": exc.detail})
        _report(request, action, done, errors)

    @admin.action(description=_("Отменить (только в очереди)"))
    def cancel_commands(self, request, queryset):
        self._each(
            request,
            queryset,
            gettext("Отмена"),
            lambda c: f"#{services.command_cancel(user=request.user, command_id=c.pk).id}",
        )

    @admin.action(description=_("Отменить принудительно (и взятые агентом: он узнает при следующем запросе)"))
    def force_cancel_commands(self, request, queryset):
        self._each(
            request,
            queryset,
            gettext("Принудительная отмена"),
            lambda c: f"#{services.command_cancel(user=request.user, command_id=c.pk, force=True).id}",
        )

    @admin.action(description=_("Повторить в новом пакете"))
    def retry_commands(self, request, queryset):
        self._each(
            request,
            queryset,
            gettext("Повтор"),
            lambda c: gettext("#%(command)s → пакет %(batch)s")
            % {
                "command": c.pk,
                "batch": services.command_retry(user=request.user, command_id=c.pk, default_author="admin").id,
            },
        )


class SyncAgentForm(forms.ModelForm):
    class Meta:
        model = SyncAgent
        fields = ("name",)


@admin.register(SyncAgent)
class SyncAgentAdmin(admin.ModelAdmin):
    list_display = ("name", "token_prefix", "created_at", "revoked_at")
    readonly_fields = ("token_prefix", "created_at", "revoked_at")
    form = SyncAgentForm
    actions = ("rotate_tokens", "revoke_tokens")

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        # The token is made by the service and shown once; only its hash is stored.
        agent, raw = protocol.sync_agent_create(name=form.cleaned_data["name"])
        obj.pk = agent.pk
        obj.__dict__.update(SyncAgent.objects.filter(pk=agent.pk).values().first())
        messages.warning(
            request,
            gettext("Токен агента синхронизации %(name)s (показывается один раз, скопируйте его сейчас): %(token)s")
            % {"name": agent.name, "token": raw},
        )

    @admin.action(description=_("Заменить токен (новый показывается один раз)"))
    def rotate_tokens(self, request, queryset):
        for agent in queryset:
            messages.warning(
                request,
                gettext("Новый токен %(name)s (показывается один раз): %(token)s")
                % {"name": agent.name, "token": protocol.sync_agent_rotate(sync_agent=agent)},
            )

    @admin.action(description=_("Отозвать токен"))
    def revoke_tokens(self, request, queryset):
        queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


@admin.register(SyncAgentContact)
class SyncAgentContactAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "sync_agent",
        "last_contact_at",
        "version",
        "launcher_version",
        "update_state",
        "update_from",
        "update_to",
        "settings_version",
    )


@admin.register(RateLimitEvent)
class RateLimitEventAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("sync_agent", "at", "retry_after_seconds", "path")


@admin.register(SyncRun)
class SyncRunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "kind", "status", "started_at", "finished_at", "counts")
    list_filter = ("kind", "status")


class PublicationForm(forms.ModelForm):
    artifact_file = forms.FileField(
        label=_("архив"),
        help_text=_("Архив <code>.tar.gz</code> агента синхронизации (в его корне — каталог <code>syncagent/</code>)."),
    )

    class Meta:
        model = Publication
        fields = ("version", "notes")

    def clean(self):
        data = super().clean()
        latest = Publication.objects.order_by("-version").values_list("version", flat=True).first()
        if data.get("version") is not None and latest is not None and data["version"] <= latest:
            raise forms.ValidationError(
                gettext("версия должна быть новее опубликованной v%(latest)s") % {"latest": latest}
            )
        return data


@admin.register(Publication)
class PublicationAdmin(admin.ModelAdmin):
    list_display = ("version", "size", "sha256", "published_at", "published_by")
    readonly_fields = ("sha256", "size", "published_at", "published_by")
    form = PublicationForm

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

    def get_fields(self, request, obj=None):
        if obj is not None:  # a published version is only read: the upload field belongs to the add form
            return ("version", "notes", "sha256", "size", "published_at", "published_by")
        return super().get_fields(request, obj)

    def has_add_permission(self, request):
        return request.user.is_staff and super().has_add_permission(request)

    def save_model(self, request, obj, form, change):
        publication = protocol.publication_create(
            version=form.cleaned_data["version"],
            artifact=form.cleaned_data["artifact_file"].read(),
            notes=form.cleaned_data.get("notes") or "",
            user=request.user,
        )
        obj.pk = publication.pk
        messages.success(
            request,
            gettext("Опубликована v%(version)s, sha256 %(sha256)s")
            % {"version": publication.version, "sha256": publication.sha256},
        )


# The settings' descriptions as the admin's chooser shows them (hub.hub_settings.SPECS keeps the English ones
# the API and MCP tell).
SETTING_TEXTS = {
    "base_label": _("метка каждой созданной хабом задачи; по ней выбирает базовый JQL"),
    "poll_interval_seconds": _("как часто агент синхронизации запрашивает команды"),
    "lease_seconds": _("аренда взятой команды"),
    "full_sync_cron": _("когда агент синхронизации делает полную синхронизацию (расписание из 5 полей, UTC)"),
    "projects": _("отражаемые проекты"),
    "project_acl": _("проект → кто может читать его задачи в хабе и в хранилище знаний (нет — все)"),
    "sync_overlap_minutes": _("окно перечитывания при частичной синхронизации"),
    "page_size": _("задач на страницу выгрузки"),
}


class HubSettingForm(forms.ModelForm):
    # described in the reader's language: the choices are made per form, not once at import
    key = forms.ChoiceField(
        label=_("ключ"), choices=lambda: [(k, str(SETTING_TEXTS.get(k, spec[2]))) for k, spec in SPECS.items()]
    )
    value = forms.JSONField(
        label=_("значение"),
        help_text=_(
            'Значение в JSON, например: <code>10</code>, <code>"AWPCA"</code>, <code>["AURORA"]</code>, <code>{"AURORA": ["group:it"]}</code>'
        ),
    )

    class Meta:
        model = HubSetting
        fields = ("key", "value")

    def clean(self):
        data = super().clean()
        if "key" in data and "value" in data:
            try:
                data["value"] = setting_validate(key=data["key"], value=data["value"])
            except ApplicationError as exc:
                raise forms.ValidationError(str(exc.message)) from None
        return data


@admin.register(HubSetting)
class HubSettingAdmin(admin.ModelAdmin):
    list_display = ("key", "value", "updated_at", "updated_by")
    form = HubSettingForm

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        version = services.settings_set(
            user=request.user, key=form.cleaned_data["key"], value=form.cleaned_data["value"]
        )
        messages.success(
            request, gettext("Версия настроек (settings_version) теперь %(version)s") % {"version": version}
        )
