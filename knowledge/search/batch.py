"""A batch: several statements sent as one message, their result sets read back by name.

A search saves round trips by sending its statements together (``achilles.prepared``): the
server answers with one result set per statement, in order. Reading them by position ties the
reader to the order and the conditions the statements were appended under; here each statement is
recorded with the name of its result set as it is appended, and ``run`` returns the sets by name.
A statement whose rows nobody reads (the HNSW settings) is appended without a name.

Result columns are named too: each statement that produces rows has, next to it, a class of its
columns' positions (``row[Detail.TITLE]``). Plain ``Final`` ints, not an ``IntEnum``: reading an
enum member costs ≈ 0.33 µs under Python 3.11 (a class attribute, ≈ 0.015 µs; a literal index
≈ 0.06), and a search reads a few hundred columns.
"""

from __future__ import annotations

from typing import Any

from achilles import prepared

Rows = list[tuple[Any, ...]]


class Batch:
    """Statements to send as one message, each with the name its rows are read back by."""

    __slots__ = ("names", "params", "statements")

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        self.statements: list[tuple[str, bool]] = []  # (SQL, prepare?): ``achilles.prepared``
        self.names: list[str | None] = []
        self.params: dict[str, Any] = params if params is not None else {}

    def add(self, name: str | None, sql: str, *, prepare: bool, params: dict[str, Any] | None = None) -> Batch:
        """Append ``sql`` (prepared when ``prepare``); its rows are read back as ``name`` (None: not
        read). Names are unique in a message."""
        if name is not None and name in self.names:
            raise ValueError(f"result set {name!r} is named twice in one message")
        self.statements.append((sql, prepare))
        self.names.append(name)
        if params:
            self.params.update(params)
        return self

    def __bool__(self) -> bool:
        return bool(self.statements)

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def run(self, cursor: Any, *, in_transaction: bool | None = None) -> dict[str, Rows]:
        """Send the statements on ``cursor`` and read every named result set: {name: rows}."""
        prepared.execute(cursor, self.statements, self.params, in_transaction=in_transaction)
        sets: dict[str, Rows] = {}
        for position, name in enumerate(self.names):
            if position:
                cursor.nextset()
            if name is not None:
                sets[name] = cursor.fetchall()
        return sets
