from django.db import models
from django.utils.translation import gettext_lazy as _


class Source(models.TextChoices):
    CHAT = "chat", _("чат")
    AGENTS = "agents", _("агенты")


class GroupBy(models.TextChoices):
    USER = "user", _("человек")
    GROUP = "group", _("группа")
    MODEL = "model", _("модель")
    AGENT = "agent", _("агент")
    DAY = "day", _("день")
