"""The hub in the Django admin: the mirror read-only; batches and commands with cancel / force-cancel /
retry through the services; sync agents (token shown once); publications upload; settings; sync runs."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.utils import timezone
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

    @admin.display(description="raw Jira fields")
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
                errors.append(f"batch {batch.pk}: {exc.detail}")
                continue
            done.append(f"batch {batch.pk}: {len(result.cancelled)} cancelled")
            for command_id in result.claimed:
                messages.warning(request, claimed_command_line(command_id))
        _report(request, "Cancel", done, errors)


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
                errors.append(f"command {command.pk}: {exc.detail}")
        _report(request, action, done, errors)

    @admin.action(description=_("Отменить (только в очереди)"))
    def cancel_commands(self, request, queryset):
        self._each(
            request, queryset, "Cancel", lambda c: f"#{services.command_cancel(user=request.user, command_id=c.pk).id}"
        )

    @admin.action(description=_("Отменить принудительно (и взятые агентом: он узнает при следующем запросе)"))
    def force_cancel_commands(self, request, queryset):
        self._each(
            request,
            queryset,
            "Force-cancel",
            lambda c: f"#{services.command_cancel(user=request.user, command_id=c.pk, force=True).id}",
        )

    @admin.action(description=_("Повторить в новом пакете"))
    def retry_commands(self, request, queryset):
        self._each(
            request,
            queryset,
            "Retry",
            lambda c: f"#{c.pk} → batch {services.command_retry(user=request.user, command_id=c.pk, default_author='admin').id}",
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
        messages.warning(request, f"Token of sync agent {agent.name} (shown once, copy it now): {raw}")

    @admin.action(description=_("Заменить токен (новый показывается один раз)"))
    def rotate_tokens(self, request, queryset):
        for agent in queryset:
            messages.warning(
                request, f"New token of {agent.name} (shown once): {protocol.sync_agent_rotate(sync_agent=agent)}"
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
    artifact_file = forms.FileField(help_text="The sync agent's .tar.gz (its root holds syncagent/).")

    class Meta:
        model = Publication
        fields = ("version", "notes")

    def clean(self):
        data = super().clean()
        latest = Publication.objects.order_by("-version").values_list("version", flat=True).first()
        if data.get("version") is not None and latest is not None and data["version"] <= latest:
            raise forms.ValidationError(f"version must be newer than the published v{latest}")
        return data


@admin.register(Publication)
class PublicationAdmin(admin.ModelAdmin):
    list_display = ("version", "size", "sha256", "published_at", "published_by")
    readonly_fields = ("sha256", "size", "published_at", "published_by")
    form = PublicationForm

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

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
        messages.success(request, f"Published v{publication.version}, sha256 {publication.sha256}")


class HubSettingForm(forms.ModelForm):
    key = forms.ChoiceField(choices=[(k, f"{k} — {spec[2]}") for k, spec in SPECS.items()])
    value = forms.JSONField(help_text='JSON: 10, "AWPCA", ["AURORA"], {"AURORA": ["group:it"]}')

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
        messages.success(request, f"settings_version is now {version}")
