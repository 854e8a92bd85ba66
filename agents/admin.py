"""The admin registry of agents (AE-GOV): every agent with its owner, the owner's ``enabled``
(read-only here), the admin's ``admin_paused`` (editable, also as bulk actions) and a status."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import OuterRef, Subquery
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents import services
from agents.choices import ACTIVE_STATES
from agents.models import Agent, AgentRun


class AgentRunInline(admin.TabularInline):
    model = AgentRun
    extra = 0
    can_delete = False
    ordering = ["-id"]
    fields = ("id", "trigger", "state", "reason", "tokens_used", "started_at", "finished_at")
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).order_by("-id")


class AgentChangelistForm(forms.ModelForm):
    """A row of the list's editable column: its checkbox named after the agent (a bare checkbox in a
    table cell has no accessible name — axe's critical «label» rule)."""

    class Meta:
        model = Agent
        fields = ("admin_paused",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["admin_paused"].widget.attrs["aria-label"] = gettext("Приостановить агента «%(name)s»") % {
            "name": self.instance.name
        }


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "enabled", "admin_paused", "status", "model", "schedule_summary", "next_run_at")
    list_editable = ("admin_paused",)
    list_filter = ("admin_paused", "enabled", "model", ("owner", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "owner__username")
    list_select_related = ("owner", "model")
    actions = ("pause_selected", "resume_selected")
    fields = (
        "name",
        "owner",
        "enabled",
        "admin_paused",
        "model",
        "schedule",
        "next_run_at",
        "instructions",
        "created_at",
        "updated_at",
    )
    # The admin holds one lever: admin_paused. Everything else is the owner's.
    readonly_fields = (
        "name",
        "owner",
        "enabled",
        "model",
        "schedule",
        "next_run_at",
        "instructions",
        "created_at",
        "updated_at",
    )
    inlines = [AgentRunInline]

    def has_add_permission(self, request):
        return False

    def get_changelist_form(self, request, **kwargs):
        return AgentChangelistForm

    def get_queryset(self, request):
        # The active run's state rides on each row (one subquery), for the status column.
        active = AgentRun.objects.filter(agent=OuterRef("pk"), state__in=ACTIVE_STATES).values("state")[:1]
        return super().get_queryset(request).annotate(active_state=Subquery(active))

    @admin.display(description=_("состояние"))
    def status(self, obj: Agent) -> str:
        return obj.status(getattr(obj, "active_state", None)).label

    @admin.display(description=_("расписание"))
    def schedule_summary(self, obj: Agent) -> str:
        s = obj.schedule
        if not s:
            return gettext("только вручную")
        if s.get("type") == "interval":
            return gettext("каждые %(minutes)s мин") % {"minutes": s.get("every_minutes")}
        days = [gettext(d) for d in ("пн", "вт", "ср", "чт", "пт", "сб", "вс")]
        # a calendar time is read in the owner's zone: named, since the admin reads in their own
        return f"{days[int(s.get('weekday', 0))]} {s.get('time')} ({obj.owner.effective_timezone()})"

    def save_model(self, request, obj, form, change):
        # One path per write: the lock goes through the service (it recomputes next_run_at).
        if change and "admin_paused" in form.changed_data:
            services.agent_set_admin_paused(agent_id=obj.pk, paused=obj.admin_paused, actor=request.user)

    @admin.action(description=_("Приостановить выбранных агентов (блокировка администратора)"))
    def pause_selected(self, request, queryset):
        changed = services.agents_set_admin_paused(
            agent_ids=list(queryset.values_list("pk", flat=True)), paused=True, actor=request.user
        )
        self.message_user(request, gettext("Приостановлено агентов: %(n)s.") % {"n": changed}, messages.SUCCESS)

    @admin.action(description=_("Возобновить выбранных агентов (снять блокировку администратора)"))
    def resume_selected(self, request, queryset):
        changed = services.agents_set_admin_paused(
            agent_ids=list(queryset.values_list("pk", flat=True)), paused=False, actor=request.user
        )
        self.message_user(request, gettext("Возобновлено агентов: %(n)s.") % {"n": changed}, messages.SUCCESS)


@admin.register(AgentRun)
class AgentRunAdmin(admin.ModelAdmin):
    list_display = ("id", "agent", "trigger", "state", "reason", "tokens_used", "started_at", "finished_at")
    list_filter = ("state", "trigger", "reason")
    search_fields = ("agent__name", "agent__owner__username")
    list_select_related = ("agent",)
    readonly_fields = [f.name for f in AgentRun._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
