"""Admin of the platform core. Every write goes through the core's actions (``achilles.services``,
``achilles.platform``), the same ones the API and the commands call, so what depends on a change
(calendar slots, the search memo, the settings cache, the audit trail) follows whichever door it
came through."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from achilles import services
from achilles.directory.audit import IDENTITY_ACTIONS
from achilles.models import AllowedModel, ApiToken, AuditEvent, PlatformSettings, ScimToken, User
from achilles.names import name_clean
from achilles.platform import platform_settings_update
from achilles.scim.services import scim_token_revoke


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    fieldsets = BaseUserAdmin.fieldsets + (("Achilles", {"fields": ("timezone", "source")}),)
    list_display = ("username", "email", "is_staff", "is_active", "source", "timezone")
    list_filter = (*BaseUserAdmin.list_filter, "source")

    def save_model(self, request, obj, form, change):
        if not change or not {"timezone", "is_active"} & set(form.changed_data):
            super().save_model(request, obj, form, change)
            return
        timezone, active = obj.timezone, obj.is_active
        obj.timezone = form.initial.get("timezone")  # the rest of the form saves as usual …
        obj.is_active = form.initial.get("is_active", active)
        super().save_model(request, obj, form, change)
        if "timezone" in form.changed_data:
            services.user_timezone_set(user=obj, timezone=timezone)  # … the zone through its action
        if "is_active" in form.changed_data:  # … and the switch (audited; off → agents off)
            services.user_active_set(user=obj, active=active, actor=request.user, reason="admin", via="admin")


@admin.register(PlatformSettings)
class PlatformSettingsAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "timezone",
        "weekly_token_budget",
        "agent_iteration_cap",
        "web_search_enabled",
        "updated_at",
    )

    def has_add_permission(self, request):
        return False  # the one row comes from a data migration

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        platform_settings_update(actor=request.user, **{name: getattr(obj, name) for name in form.changed_data})


def _changes(form) -> dict:
    """``{field: [before, after]}`` for the fields an admin form changed."""
    return {name: [form.initial.get(name), form.cleaned_data.get(name)] for name in form.changed_data}


class AgentModelForm(forms.ModelForm):
    class Meta:
        model = AllowedModel
        fields = (
            "name",
            "provider",
            "kind",
            "context_window",
            "is_default",
            "options",
            "input_price_per_mtok",
            "output_price_per_mtok",
        )

    def clean_name(self):
        # trimmed, with a visible character (achilles.names), like every name people give things
        try:
            return name_clean(self.cleaned_data["name"])
        except ValueError as exc:
            raise forms.ValidationError(gettext("Название %(problem)s.") % {"problem": exc}) from exc


@admin.register(AllowedModel)
class AllowedModelAdmin(admin.ModelAdmin):
    form = AgentModelForm
    list_display = (
        "name",
        "provider",
        "kind",
        "context_window",
        "is_default",
        "input_price_per_mtok",
        "output_price_per_mtok",
    )
    list_filter = ("kind", "provider", "is_default")
    search_fields = ("name",)

    def save_model(self, request, obj, form, change):
        services.allowed_model_save(model=obj, actor=request.user, changes=_changes(form), created=not change)

    def delete_model(self, request, obj):
        services.allowed_model_delete(model=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for model in queryset:
            services.allowed_model_delete(model=model, actor=request.user)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read-only: a token is created by its owner (API, /tokens/) or ``manage.py api_token``, and an
    admin may only revoke it (never move it to another user or edit its hash)."""

    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("user__username", "name", "prefix")
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description=_("Отозвать выбранные токены"), permissions=["view"])
    def revoke(self, request, queryset):
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True).select_related("user"):
            services.api_token_revoke(user=token.user, token_id=token.pk, actor=request.user)
            revoked += 1
        self.message_user(request, gettext("Отозвано токенов: %(n)s.") % {"n": revoked}, messages.SUCCESS)


class IdentityEventFilter(admin.SimpleListFilter):
    """«Identity events»: sign-ins, source and group changes by every sync, (de)activations."""

    title = _("вид события")
    parameter_name = "kind"

    def lookups(self, request, model_admin):
        return (("identity", _("события учётных записей")),)

    def queryset(self, request, queryset):
        if self.value() == "identity":
            return queryset.filter(action__in=IDENTITY_ACTIONS)
        return queryset


@admin.register(ScimToken)
class ScimTokenAdmin(admin.ModelAdmin):
    """Read-only: an identity provider's SCIM token is made by ``manage.py scim_token create NAME``
    (shown once); here it can be seen and revoked (every active token of that provider's name)."""

    list_display = ("name", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "prefix")
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description=_("Отозвать токены выбранных провайдеров"), permissions=["view"])
    def revoke(self, request, queryset):
        names = sorted(set(queryset.filter(revoked_at__isnull=True).values_list("name", flat=True)))
        revoked = sum(scim_token_revoke(name=name, actor=request.user) for name in names)
        self.message_user(request, gettext("Отозвано токенов: %(n)s.") % {"n": revoked}, messages.SUCCESS)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the trail is written by the services and is append-only in the database."""

    list_display = ("created_at", "actor", "action", "target", "request_id")
    list_filter = (IdentityEventFilter, "action", ("created_at", admin.DateFieldListFilter))
    search_fields = ("actor", "target", "request_id")
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "actor_id", "actor", "action", "target", "details", "request_id")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
