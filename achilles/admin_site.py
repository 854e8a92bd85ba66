"""The admin as people see it: branded «Achilles», in the reader's language (Russian, or English —
locale/en), with the libraries' internals kept for superusers.

Django's admin speaks the request's language (Russian) but takes model names from each model's
``Meta``; the platform's models were named in English, so a page read «Выберите platform settings
для изменения» and a list "Batchs". Their Russian names live here, in one table applied when the
apps are ready: a ``Meta.verbose_name`` per model would be a migration in every app for text that
never reaches the database. The names are lazy translations: each page renders them in its language.
"""

from __future__ import annotations

from types import MethodType

from django.apps import apps
from django.contrib import admin
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from achilles import compat

SITE_HEADER = "Achilles"
SITE_TITLE = "Achilles"
INDEX_TITLE = _("Администрирование")

# Libraries' own tables: sign-in lockouts (django-axes) and the beat's schedule rows
# (django_celery_beat, written by achilles.periodic). A superuser may need them; nobody else should.
INTERNAL_APPS = frozenset({"axes", "django_celery_beat"})

APP_NAMES = {
    "achilles": _("Платформа"),
    "knowledge": _("Знания"),
    "agents": _("Агенты"),
    "hub": _("Хаб (Jira)"),
    "conversations": _("Беседы"),
    "usage": _("Расходы AI"),
    "axes": _("Блокировки входа"),  # django-axes names itself "Axes"
}

# (app_label, model_name) → (singular, plural)
MODEL_NAMES: dict[tuple[str, str], tuple[str | Promise, str | Promise]] = {
    ("achilles", "user"): (_("пользователь"), _("пользователи")),
    ("achilles", "platformsettings"): (_("настройки платформы"), _("настройки платформы")),
    ("achilles", "allowedmodel"): (_("разрешённая модель"), _("разрешённые модели")),
    ("achilles", "apitoken"): (_("API-токен"), _("API-токены")),
    ("achilles", "scimtoken"): (_("SCIM-токен"), _("SCIM-токены")),
    ("achilles", "auditevent"): (_("событие аудита"), _("журнал аудита")),
    ("knowledge", "record"): (_("запись"), _("записи")),
    ("knowledge", "chunk"): (_("фрагмент"), _("фрагменты")),
    ("knowledge", "recordlink"): (_("связь записей"), _("связи записей")),
    ("knowledge", "accesssignal"): (_("сигнал доступа"), _("сигналы доступа")),
    ("knowledge", "sourcepolicy"): (_("источник"), _("источники")),
    ("knowledge", "document"): (_("документ"), _("документы")),
    ("knowledge", "connector"): (_("коннектор"), _("коннекторы")),
    ("knowledge", "connectorrun"): (_("синхронизация коннектора"), _("синхронизации коннекторов")),
    ("agents", "agent"): (_("агент"), _("агенты")),
    ("agents", "agentrun"): (_("запуск агента"), _("запуски агентов")),
    ("hub", "mirrorissue"): (_("задача зеркала"), _("задачи зеркала")),
    ("hub", "mirrorlink"): (_("связь задачи"), _("связи задачи")),
    ("hub", "mirrorcomment"): (_("комментарий задачи"), _("комментарии задачи")),
    ("hub", "issuenote"): (_("заметка к задаче"), _("заметки к задачам")),
    ("hub", "batch"): (_("пакет команд"), _("пакеты команд")),
    ("hub", "command"): (_("команда"), _("команды")),
    ("hub", "syncagent"): (_("агент синхронизации"), _("агенты синхронизации")),
    ("hub", "syncagentcontact"): (_("связь с агентом синхронизации"), _("связи с агентом синхронизации")),
    ("hub", "ratelimitevent"): (_("ограничение частоты"), _("ограничения частоты")),
    ("hub", "syncrun"): (_("прогон синхронизации"), _("прогоны синхронизации")),
    ("hub", "publication"): (_("публикация"), _("публикации")),
    ("hub", "hubsetting"): (_("настройка хаба"), _("настройки хаба")),
}


def _superuser_only(model_admin: admin.ModelAdmin) -> None:
    """The model's admin answers to superusers only: no menu entry, and its pages refuse others."""

    def gate(name: str) -> None:
        original = getattr(model_admin, name)

        def checked(self, request, *args, **kwargs):
            return request.user.is_active and request.user.is_superuser and original(request, *args, **kwargs)

        setattr(model_admin, name, MethodType(checked, model_admin))

    for name in (
        "has_module_permission",
        "has_view_permission",
        "has_add_permission",
        "has_change_permission",
        "has_delete_permission",
    ):
        gate(name)


def admin_site_configure(site: admin.AdminSite = admin.site) -> None:
    """Brand the site, name the platform's apps and models in Russian, gate the internal apps."""
    site.site_header, site.site_title, site.index_title = SITE_HEADER, SITE_TITLE, INDEX_TITLE
    for label, name in APP_NAMES.items():
        try:
            apps.get_app_config(label).verbose_name = name
        except LookupError:
            continue
    for (label, model_name), (singular, plural) in MODEL_NAMES.items():
        try:
            meta = apps.get_model(label, model_name)._meta
        except LookupError:
            continue
        meta.verbose_name, meta.verbose_name_plural = singular, plural
    for model, model_admin in compat.admin_site_registry(site).items():
        if model._meta.app_label in INTERNAL_APPS:
            _superuser_only(model_admin)
