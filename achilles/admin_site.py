"""The admin as people see it: branded «Achilles», in Russian, with the libraries' internals kept for
superusers.

Django's admin speaks the request's language (Russian) but takes model names from each model's
``Meta``; the platform's models were named in English, so a page read «Выберите platform settings
для изменения» and a list "Batchs". Their Russian names live here, in one table applied when the
apps are ready: a ``Meta.verbose_name`` per model would be a migration in every app for text that
never reaches the database.
"""

from __future__ import annotations

from types import MethodType

from django.apps import apps
from django.contrib import admin

from achilles import compat

SITE_HEADER = "Achilles"
SITE_TITLE = "Achilles"
INDEX_TITLE = "Администрирование"

# Libraries' own tables: sign-in lockouts (django-axes) and the beat's schedule rows
# (django_celery_beat, written by achilles.periodic). A superuser may need them; nobody else should.
INTERNAL_APPS = frozenset({"axes", "django_celery_beat"})

APP_NAMES = {
    "achilles": "Платформа",
    "knowledge": "Знания",
    "agents": "Агенты",
    "hub": "Хаб (Jira)",
    "conversations": "Беседы",
    "usage": "Расходы AI",
}

# (app_label, model_name) → (singular, plural)
MODEL_NAMES: dict[tuple[str, str], tuple[str, str]] = {
    ("achilles", "user"): ("пользователь", "пользователи"),
    ("achilles", "platformsettings"): ("настройки платформы", "настройки платформы"),
    ("achilles", "allowedmodel"): ("разрешённая модель", "разрешённые модели"),
    ("achilles", "apitoken"): ("API-токен", "API-токены"),
    ("achilles", "scimtoken"): ("SCIM-токен", "SCIM-токены"),
    ("achilles", "auditevent"): ("событие аудита", "журнал аудита"),
    ("knowledge", "record"): ("запись", "записи"),
    ("knowledge", "chunk"): ("фрагмент", "фрагменты"),
    ("knowledge", "recordlink"): ("связь записей", "связи записей"),
    ("knowledge", "accesssignal"): ("сигнал доступа", "сигналы доступа"),
    ("knowledge", "sourcepolicy"): ("источник", "источники"),
    ("knowledge", "document"): ("документ", "документы"),
    ("knowledge", "connector"): ("коннектор", "коннекторы"),
    ("knowledge", "connectorrun"): ("синхронизация коннектора", "синхронизации коннекторов"),
    ("agents", "agent"): ("агент", "агенты"),
    ("agents", "agentrun"): ("запуск агента", "запуски агентов"),
    ("hub", "mirrorissue"): ("задача зеркала", "задачи зеркала"),
    ("hub", "issuenote"): ("заметка к задаче", "заметки к задачам"),
    ("hub", "batch"): ("пакет команд", "пакеты команд"),
    ("hub", "command"): ("команда", "команды"),
    ("hub", "syncagent"): ("агент синхронизации", "агенты синхронизации"),
    ("hub", "syncagentcontact"): ("связь с агентом синхронизации", "связи с агентом синхронизации"),
    ("hub", "ratelimitevent"): ("ограничение частоты", "ограничения частоты"),
    ("hub", "syncrun"): ("прогон синхронизации", "прогоны синхронизации"),
    ("hub", "publication"): ("публикация", "публикации"),
    ("hub", "hubsetting"): ("настройка хаба", "настройки хаба"),
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
