"""The names people read for the store's source systems: «Файлы», «Confluence», «Jira».

A record's ``source_system`` is an internal key (``uploads``, ``confluence:1`` for a connector's
records); pages and hints show a label instead. An admin may set a source's own label
(``SourcePolicy.display_label``); otherwise the kind's default, and for a source nobody named, the
key itself (it is what the admin typed when loading it).
"""

from __future__ import annotations

from collections.abc import Mapping

from django.core.cache import cache
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from knowledge.models import SourcePolicy

# The admins' labels are read by every grounded turn and thread page: cached in Redis (shared by
# every process), dropped after commit whenever a policy row is saved or deleted.
OVERRIDES_CACHE_KEY = "knowledge:source_label_overrides:v1"
OVERRIDES_CACHE_SECONDS = 300

DEFAULT_LABELS = {"uploads": "Файлы", "files": "Файлы", "confluence": "Confluence", "jira": "Jira"}


def source_label(source_system: str, overrides: Mapping[str, str] | None = None) -> str:
    """The label of one source: its own (``overrides``), else its kind's (``confluence:3`` → Confluence)."""
    own = (overrides or {}).get(source_system)
    if own:
        return own
    if source_system in DEFAULT_LABELS:
        return DEFAULT_LABELS[source_system]
    kind = source_system.split(":", 1)[0]
    if kind != source_system and kind in DEFAULT_LABELS:
        return DEFAULT_LABELS[kind]
    return source_system


def source_label_overrides() -> dict[str, str]:
    """The labels admins set, by source system (a handful of rows; cached, see OVERRIDES_CACHE_KEY)."""
    cached = cache.get(OVERRIDES_CACHE_KEY)
    if cached is not None:
        return cached
    overrides = dict(SourcePolicy.objects.exclude(display_label="").values_list("source_system", "display_label"))
    cache.set(OVERRIDES_CACHE_KEY, overrides, OVERRIDES_CACHE_SECONDS)
    return overrides


@receiver(post_save, sender=SourcePolicy, dispatch_uid="knowledge_source_label_overrides_saved")
@receiver(post_delete, sender=SourcePolicy, dispatch_uid="knowledge_source_label_overrides_deleted")
def _overrides_changed(**kwargs) -> None:
    cache.delete(OVERRIDES_CACHE_KEY)  # at once for this connection's readers, and again after commit
    transaction.on_commit(lambda: cache.delete(OVERRIDES_CACHE_KEY))
