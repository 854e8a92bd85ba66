"""The grounding contract (QE-9): engine-made «не нашёл» and the withheld hint (the per-sentence
support check is ``conversations.support``).

Pure functions. «Не нашёл» on an empty retrieval is produced here, never asked of the model.
Withheld records are reported as coordinates only (source system; an author contact when
``author_principal_id`` is ``user:<id>`` of an existing user, silently omitted otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from achilles.llm import NOT_FOUND_TEXT
from knowledge.facade import Withheld

__all__ = [
    "NOT_FOUND_TEXT",
    "ONLY_WITHHELD_TEXT",
    "Contact",
    "HintSource",
    "WithheldHint",
    "author_user_id",
    "withheld_hint",
    "engine_answer",
]

ONLY_WITHHELD_TEXT = (
    "Среди доступных вам материалов ответа нет, но релевантные документы есть — они закрыты правами доступа."
)
HINT_LEAD = "Есть и релевантные материалы, закрытые для вас правами доступа"

_USER_PRINCIPAL = re.compile(r"^user:(\d+)$")


@dataclass(frozen=True)
class Contact:
    user_id: int
    username: str
    name: str


def author_user_id(principal: str | None) -> int | None:
    match = _USER_PRINCIPAL.match(principal or "")
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class HintSource:
    """One source system holding withheld records; ``contact`` only for an existing author."""

    source_system: str
    contact: Contact | None = None

    def as_dict(self) -> dict:
        entry: dict = {"source_system": self.source_system}
        if self.contact is not None:
            entry["contact"] = {
                "user_id": self.contact.user_id,
                "username": self.contact.username,
                "name": self.contact.name,
            }
        return entry


@dataclass(frozen=True)
class WithheldHint:
    """The hint appended to an answer when relevant records were withheld (coordinates only)."""

    text: str
    sources: tuple[HintSource, ...]

    def as_dict(self) -> dict:
        """The wire and storage form: ``{"text", "sources": [{"source_system", "contact"?}]}``."""
        return {"text": self.text, "sources": [s.as_dict() for s in self.sources]}


def withheld_hint(withheld: Sequence[Withheld], contacts: Mapping[int, Contact]) -> WithheldHint | None:
    """The hint, or None when nothing is withheld.

    ``contacts`` maps user ids of existing users; an author that maps to none is left out.
    """
    if not withheld:
        return None
    groups: set[tuple[str, int | None]] = set()
    for item in withheld:
        user_id = author_user_id(item.author_principal_id)
        groups.add((item.source_system, user_id if user_id in contacts else None))
    sources = []
    parts = []
    for system, user_id in sorted(groups, key=lambda g: (g[0], g[1] or 0)):
        contact = contacts[user_id] if user_id is not None else None
        part = f"источник «{system}»"
        if contact is not None:
            part += f", автор — {contact.name or contact.username} (можно запросить доступ)"
        sources.append(HintSource(source_system=system, contact=contact))
        parts.append(part)
    return WithheldHint(text=f"{HINT_LEAD}: " + "; ".join(parts) + ".", sources=tuple(sources))


def engine_answer(*, packed_any: bool, withheld: Sequence[Withheld]) -> str | None:
    """The engine's own answer when there is nothing to ground on, else None (the model answers)."""
    if packed_any:
        return None
    return ONLY_WITHHELD_TEXT if withheld else NOT_FOUND_TEXT
