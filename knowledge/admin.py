"""Django admin of the Knowledge Store: records, chunks, links, signals, uploads and the search preview."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import Count
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from achilles.errors import ApplicationError
from achilles.models import User
from knowledge import services
from knowledge.connectors import services as connector_services
from knowledge.connectors.models import ACTIVE_RUN_STATES, Connector, ConnectorRun
from knowledge.contracts import MAX_K
from knowledge.models import AccessSignal, Chunk, Document, Record, RecordLink, SourcePolicy
from knowledge.search.embedding import embedding_config
from knowledge.selectors import timed
from knowledge.uploads import services as uploads


def _search_mode_message(request) -> None:
    config = embedding_config()
    if config is None:
        messages.warning(
            request,
            gettext(
                "Векторный поиск выключен: в списке разрешённых моделей нет модели эмбеддингов по умолчанию "
                "(kind = embedding). Поиск только лексический."
            ),
        )
    else:
        messages.info(
            request, gettext("Гибридный поиск: лексический + векторный (%(model)s).") % {"model": config.name}
        )


class ChunkInline(admin.TabularInline):
    model = Chunk
    fields = ("ordinal", "heading", "text", "has_embedding")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(boolean=True, description=_("с эмбеддингом"))
    def has_embedding(self, obj):
        return obj.embedding is not None

    def has_add_permission(self, request, obj=None):
        return False


class LinkInline(admin.TabularInline):
    model = RecordLink
    fk_name = "from_record"
    fields = ("to_record", "link_type", "created")
    readonly_fields = ("created",)
    raw_id_fields = ("to_record",)
    extra = 0
    verbose_name = _("исходящая связь")
    verbose_name_plural = _("исходящие связи")

    @admin.display(description=_("создано"))
    def created(self, obj):
        return obj.created_at if obj.pk else ""  # a row not yet saved has no date (not a database default)


class RecordForm(forms.ModelForm):
    class Meta:
        model = Record
        fields = ("acl", "never_hint")

    def clean_acl(self):
        try:
            return services.acl_resolve(self.cleaned_data["acl"])
        except ApplicationError as exc:
            raise forms.ValidationError(str(exc.message)) from exc


@admin.register(Record)
class RecordAdmin(admin.ModelAdmin):
    form = RecordForm
    list_display = (
        "title",
        "source_system",
        "external_id",
        "acl_display",
        "author_principal_id",
        "trust_score",
        "chunk_count",
        "updated_at",
    )
    list_filter = ("source_system",)
    search_fields = ("title", "external_id", "url")
    fields = (
        "source_system",
        "external_id",
        "title",
        "url",
        "author_principal_id",
        "acl",
        "acl_also",
        "never_hint",
        "user_writable",
        "trust_score",
        "origin",
        "embedding_model",
        "content_hash",
        "content_changed_at",
        "last_accessed_at",
        "created_at",
        "updated_at",
    )
    # Content comes from ingestion; only the ACL and the hint opt-out are edited here (through the service, so
    # principals are validated and the chunks follow by trigger).
    readonly_fields = tuple(f for f in fields if f not in ("acl", "never_hint"))
    inlines = [LinkInline, ChunkInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_chunks=Count("chunks"))

    @admin.display(description="ACL")
    def acl_display(self, obj):
        return ", ".join(obj.acl)

    @admin.display(description=_("фрагментов"), ordering="_chunks")
    def chunk_count(self, obj):
        return getattr(obj, "_chunks", None)

    def has_add_permission(self, request):
        # Records come from ingestion (`manage.py ingest`, the REST API): their chunks are derived.
        return False

    def save_model(self, request, obj, form, change):
        obj.acl = services.record_acl_set(record_id=obj.pk, acl=form.cleaned_data["acl"])
        services.record_never_hint_set(record_id=obj.pk, never_hint=form.cleaned_data["never_hint"])

    def save_formset(self, request, form, formset, change):
        # outgoing links: created/deleted through the service layer
        for link in formset.save(commit=False):
            services.record_link_create(
                from_record_id=link.from_record_id, to_record_id=link.to_record_id, link_type=link.link_type
            )
        for link in formset.deleted_objects:
            services.record_link_delete(link_id=link.pk)

    def changelist_view(self, request, extra_context=None):
        _search_mode_message(request)
        extra_context = {**(extra_context or {}), "search_preview_url": reverse("admin:knowledge_search_preview")}
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        return [
            path(
                "search-preview/", self.admin_site.admin_view(self.search_preview_view), name="knowledge_search_preview"
            )
        ] + super().get_urls()

    def search_preview_view(self, request):
        """A retrieval test screen: what would this user get for this query?"""
        form = SearchPreviewForm(request.GET or None)
        result, elapsed, error = None, None, None
        if form.is_valid():
            try:
                result, elapsed = timed(
                    services.search_as_user,
                    actor=request.user,
                    user=form.cleaned_data["user"],
                    query=form.cleaned_data["query"],
                    k=form.cleaned_data["k"],
                )
            except ApplicationError as exc:
                error = str(exc.detail)
        _search_mode_message(request)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Проверка поиска"),
            "form": form,
            "result": result,
            "elapsed": elapsed,
            "error": error,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/knowledge/search_preview.html", context)


class SearchPreviewForm(forms.Form):
    query = forms.CharField(max_length=2000, label=_("Вопрос"))
    user = forms.ModelChoiceField(
        queryset=None, required=False, empty_label=_("(аноним: только публичное)"), label=_("Пользователь")
    )
    k = forms.IntegerField(min_value=1, max_value=MAX_K, initial=8, label="k")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user"].queryset = User.objects.filter(is_active=True).order_by("username")


@admin.register(Chunk)
class ChunkAdmin(admin.ModelAdmin):
    list_display = ("record", "ordinal", "heading", "short_text")
    search_fields = ("text", "heading", "record__title")
    raw_id_fields = ("record",)
    readonly_fields = ("record", "ordinal", "heading", "text", "acl")
    exclude = ("embedding",)

    @admin.display(description=_("текст"))
    def short_text(self, obj):
        return obj.text[:120]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(RecordLink)
class RecordLinkAdmin(admin.ModelAdmin):
    list_display = ("from_record", "link_type", "to_record", "created_at")
    list_filter = ("link_type",)
    raw_id_fields = ("from_record", "to_record")


@admin.register(AccessSignal)
class AccessSignalAdmin(admin.ModelAdmin):
    list_display = ("record", "kind", "principal", "message_id", "created_at")
    list_filter = ("kind",)
    raw_id_fields = ("record",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(SourcePolicy)
class SourcePolicyAdmin(admin.ModelAdmin):
    """Per source system: ``never_hint`` keeps a sensitive source out of every withheld hint."""

    list_display = ("source_system", "display_label", "never_hint", "updated_at")
    list_filter = ("never_hint",)
    search_fields = ("source_system",)


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    """Uploaded documents and their state; read-only (uploads come over REST), deleting one deletes its record."""

    list_display = ("filename", "owner", "state", "error_code", "format", "size", "chunks", "created_at")
    list_filter = ("state", "format")
    search_fields = ("filename", "title", "owner__username")
    exclude = ("content",)
    readonly_fields = (
        "owner", "filename", "format", "size", "sha256", "acl", "state", "error", "error_code", "title",
        "chunks", "record", "parsed_at",
    )  # fmt: skip
    actions = ["delete_documents"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("content").select_related("owner")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # a plain delete would leave the record behind
        return actions

    def delete_model(self, request, obj):
        uploads.document_delete(actor=request.user, document_id=obj.pk)

    @admin.action(description=_("Удалить выбранные документы и их записи"), permissions=["delete"])
    def delete_documents(self, request, queryset):
        for document in queryset:
            uploads.document_delete(actor=request.user, document_id=document.pk)


# ------------------------------------------------------------------ connectors (docs/connectors.md)


class ConnectorForm(forms.ModelForm):
    """The token is write-only: an empty field keeps the stored one, it is never shown again."""

    token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        label=_("токен"),
        help_text=_("Оставьте пустым, чтобы сохранить прежний токен."),
    )
    spaces = forms.CharField(label=_("пространства"), help_text=_("Ключи пространств через запятую."))

    class Meta:
        model = Connector
        fields = ["kind", "name", "base_url", "schedule_minutes", "permission_sync_minutes", "enabled"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["spaces"].initial = ", ".join(self.instance.scope.get("spaces", []))

    def fields_for_service(self) -> connector_services.ConnectorFields:
        data = self.cleaned_data
        return connector_services.ConnectorFields(
            kind=data["kind"],
            name=data["name"],
            base_url=data["base_url"],
            token=data.get("token") or None,
            spaces=[s for s in (p.strip() for p in data["spaces"].split(",")) if s],
            schedule_minutes=data["schedule_minutes"],
            permission_sync_minutes=data["permission_sync_minutes"],
            enabled=data["enabled"],
        )


class ConnectorRunInline(admin.TabularInline):
    model = ConnectorRun
    extra = 0
    can_delete = False
    fields = ["kind", "state", "seen", "changed", "deleted", "failed", "total", "started_at", "finished_at", "error"]
    readonly_fields = fields
    ordering = ["-id"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Connector)
class ConnectorAdmin(admin.ModelAdmin):
    """Connectors through the same services as REST: the token encrypted, write-only, never logged."""

    form = ConnectorForm
    list_display = ["name", "kind", "base_url", "enabled", "last_content_sync_at", "last_permission_sync_at"]
    inlines = [ConnectorRunInline]
    actions = ["run_content", "run_permissions", "cancel_runs"]

    def save_model(self, request, obj, form, change) -> None:
        try:
            if change:
                saved = connector_services.connector_update(
                    actor=request.user, connector_id=obj.pk, fields=form.fields_for_service()
                )
            else:
                if not form.cleaned_data.get("token"):
                    raise connector_services.ValidationFailed(gettext("нужен токен"), field="token")
                saved = connector_services.connector_create(actor=request.user, fields=form.fields_for_service())
        except ApplicationError as exc:
            messages.error(request, str(exc))
            return
        obj.pk = saved.pk

    def delete_model(self, request, obj) -> None:
        connector_services.connector_delete(actor=request.user, connector_id=obj.pk)

    def _run(self, request, queryset, kind: str) -> None:
        for connector in queryset:
            try:
                connector_services.run_request(connector_id=connector.pk, kind=kind, actor=request.user)
            except ApplicationError as exc:
                messages.warning(request, f"{connector.name}: {exc}")

    @admin.action(description=_("Запустить синхронизацию содержимого"))
    def run_content(self, request, queryset) -> None:
        self._run(request, queryset, "content")

    @admin.action(description=_("Запустить синхронизацию прав"))
    def run_permissions(self, request, queryset) -> None:
        self._run(request, queryset, "permissions")

    @admin.action(description=_("Отменить идущие синхронизации"))
    def cancel_runs(self, request, queryset) -> None:
        active = ConnectorRun.objects.filter(connector__in=queryset, state__in=ACTIVE_RUN_STATES)
        for run in active.select_related("connector"):
            try:
                connector_services.run_cancel(connector_id=run.connector_id, run_id=run.pk, actor=request.user)
                messages.info(
                    request,
                    gettext("%(connector)s: синхронизация %(run)s (%(kind)s) отменена")
                    % {"connector": run.connector.name, "run": run.pk, "kind": run.get_kind_display()},
                )
            except ApplicationError as exc:
                messages.warning(request, f"{run.connector.name}: {exc}")
