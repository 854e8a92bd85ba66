"""The withheld hint as people read it: each source once, by its label, with its authors.

The stored hint (``conversations.grounding.withheld_hint``) keys sources by the store's internal
``source_system`` and may hold one source twice — once without an author and once with one, or as
two connectors of one kind — which read «источник «files»; источник «files», автор — admin». The
page and the API show this form instead; the stored hint stays as it was written. Pure: the labels
come in as a mapping.
"""

from __future__ import annotations

from collections.abc import Mapping

from conversations.grounding import HINT_LEAD


def _contact_key(contact: dict) -> object:
    return contact.get("user_id") or contact.get("username")


def hint_for_people(hint: dict, labels: Mapping[str, str]) -> dict:
    """``hint`` with ``text`` rebuilt from its sources and ``sources`` one entry per (label, author):
    each carries ``label``; an author-less entry is dropped where the same label has an author."""
    by_label: dict[str, list[dict]] = {}
    for source in hint.get("sources", []):
        system = str(source.get("source_system", ""))
        label = labels.get(system) or system
        by_label.setdefault(label, []).append({**source, "label": label})
    sources: list[dict] = []
    parts: list[str] = []
    for label, entries in by_label.items():
        seen: set[object] = set()
        named = []
        for entry in entries:
            contact = entry.get("contact")
            if isinstance(contact, dict) and _contact_key(contact) not in seen:
                seen.add(_contact_key(contact))
                named.append(entry)
        sources.extend(named or entries[:1])
        authors = [e["contact"].get("name") or e["contact"].get("username") for e in named]
        if authors:
            word = "автор" if len(authors) == 1 else "авторы"
            parts.append(f"{label} ({word} — {', '.join(authors)}; можно запросить доступ)")
        else:
            parts.append(label)
    if not parts:
        return hint
    return {**hint, "text": f"{HINT_LEAD}: " + "; ".join(parts) + ".", "sources": sources}
