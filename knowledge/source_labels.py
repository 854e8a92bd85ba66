"""The names people read for the store's source systems: «Файлы», «Confluence», «Jira».

A record's ``source_system`` is an internal key (``uploads``, ``confluence:1`` for a connector's
records); pages and hints show a label instead. An admin may set a source's own label
(``SourcePolicy.display_label``); otherwise the kind's default, and for a source nobody named, the
key itself (it is what the admin typed when loading it).
"""

from __future__ import annotations

from collections.abc import Mapping

from knowledge.models import SourcePolicy

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
    """The labels admins set, by source system (a handful of rows)."""
    return dict(SourcePolicy.objects.exclude(display_label="").values_list("source_system", "display_label"))
