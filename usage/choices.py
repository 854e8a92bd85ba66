from django.db import models


class Source(models.TextChoices):
    CHAT = "chat", "чат"
    AGENTS = "agents", "агенты"


class GroupBy(models.TextChoices):
    USER = "user", "человек"
    GROUP = "group", "группа"
    MODEL = "model", "модель"
    AGENT = "agent", "агент"
    DAY = "day", "день"
