"""A thread as a tree of versions (regenerated answers, edited questions), and the branch it shows.

Pure: plain data in, plain data out, no ORM (tested without a database). A message's siblings are
the messages with the same parent (the same question's answers, the same answer's follow-up
questions and their edits). At every fork the branch takes the sibling chosen last: the latest of
its creation and of the reader's last flip to it (``chosen_at``), ties broken by id — so a new
answer or an edited question is shown at once, and a flip back sticks until the next version.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Node:
    id: int
    parent_id: int | None
    created_at: datetime
    chosen_at: datetime | None = None

    @property
    def preference(self) -> tuple[datetime, int]:
        chosen = self.chosen_at if self.chosen_at is not None and self.chosen_at > self.created_at else self.created_at
        return chosen, self.id


@dataclass(frozen=True)
class Branch:
    ids: tuple[int, ...]  # root → leaf
    siblings: dict[int, tuple[int, ...]] = field(
        default_factory=dict
    )  # each id of the branch: its versions, oldest first

    @property
    def leaf(self) -> int | None:
        return self.ids[-1] if self.ids else None

    def position(self, message_id: int) -> tuple[int, int]:
        """(1-based place among its versions, how many) — (1, 1) for a message without siblings."""
        versions = self.siblings.get(message_id, (message_id,))
        return versions.index(message_id) + 1 if message_id in versions else 1, len(versions)


def active_branch(nodes: Iterable[Node]) -> Branch:
    """The branch a thread shows: from its roots down, at each fork the sibling chosen last."""
    children: dict[int | None, list[Node]] = defaultdict(list)
    for node in nodes:
        children[node.parent_id].append(node)
    ids: list[int] = []
    siblings: dict[int, tuple[int, ...]] = {}
    parent: int | None = None
    seen: set[int] = set()
    while (kids := children.get(parent)) and parent not in seen:
        if parent is not None:
            seen.add(parent)
        pick = max(kids, key=lambda n: n.preference)
        ids.append(pick.id)
        siblings[pick.id] = tuple(sorted(n.id for n in kids))
        parent = pick.id
    return Branch(ids=tuple(ids), siblings=siblings)


def path_to(nodes: Iterable[Node], message_id: int) -> tuple[int, ...]:
    """The ids from the root down to ``message_id`` (included); () when it is not in ``nodes``."""
    by_id = {n.id: n for n in nodes}
    path: list[int] = []
    current: int | None = message_id
    while current is not None and current in by_id and current not in path:
        path.append(current)
        current = by_id[current].parent_id
    return tuple(reversed(path))
