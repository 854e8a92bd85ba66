from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from achilles import audit
from achilles.models import AgentModel, ApiToken, AuditEvent, PlatformSettings, User
from achilles.names import name_clean
from achilles.platform import platform_settings_changed, platform_settings_invalidate


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    fieldsets = BaseUserAdmin.fieldsets + (("Achilles", {"fields": ("timezone",)}),)
    list_display = ("username", "email", "is_staff", "is_active", "timezone")


@admin.register(PlatformSettings)
class PlatformSettingsAdmin(admin.ModelAdmin):
    list_display = ("__str__", "timezone", "weekly_token_budget", "agent_iteration_cap", "web_search_enabled", "updated_at")

    def has_add_permission(self, request):
        return not PlatformSettings.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        platform_settings_changed(actor=request.user, changes=_changes(form))
        platform_settings_invalidate()


def _changes(form) -> dict:
    """``{field: [before, after]}`` for the fields an admin form changed."""
    return {name: [form.initial.get(name), form.cleaned_data.get(name)] for name in form.changed_data}


class AgentModelForm(forms.ModelForm):
    class Meta:
        model = AgentModel
        fields = "__all__"

    def clean_name(self):
        try:
            return name_clean(self.cleaned_data["name"])
        except ValueError as exc:
            raise forms.ValidationError(f"The name {exc}.") from exc


@admin.register(AgentModel)
class AgentModelAdmin(admin.ModelAdmin):
    form = AgentModelForm
    list_display = ("name", "provider", "kind", "context_window", "is_default")
    list_filter = ("kind", "provider", "is_default")
    search_fields = ("name",)

    # The allow-list decides what may answer and where data goes: every change is audited.
    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        audit.audit_record(actor=request.user, action=audit.AGENT_MODEL_CHANGED, target=f"agent_model:{obj.name}",
                           details={"created": not change, "changes": _changes(form)})

    def delete_model(self, request, obj):
        audit.audit_record(actor=request.user, action=audit.AGENT_MODEL_DELETED, target=f"agent_model:{obj.name}",
                           details={"provider": obj.provider, "kind": obj.kind})
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            audit.audit_record(actor=request.user, action=audit.AGENT_MODEL_DELETED, target=f"agent_model:{obj.name}",
                               details={"provider": obj.provider, "kind": obj.kind})
        super().delete_queryset(request, queryset)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "key_hash", "last_used_at")
    search_fields = ("user__username", "name", "prefix")

    def has_add_permission(self, request):
        # A token's secret is shown once; create them with `manage.py api_token` or the API.
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the trail is written by the services and is append-only in the database."""

    list_display = ("created_at", "actor", "action", "target", "request_id")
    list_filter = ("action", ("created_at", admin.DateFieldListFilter))
    search_fields = ("actor", "target", "request_id")
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "actor_id", "actor", "action", "target", "details", "request_id")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
