"""The packed-context format shared by the Query Engine and the builtin model.

A tool result carrying sources is plain text, one block per source, each opened by a line that
starts with its citation marker::

    [1] Vacation policy
    Employees get 28 calendar days of paid vacation a year. Requests go through the HR portal.

    [2] Another title
    ...

The first line of a block is the title when body lines follow it; a block of a single line is
all body. Text before the first marker is ignored. A body line that itself starts with ``[N]``
is indented by ``format_context`` so retrieved text can never forge a marker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_MARKER = re.compile(r"^\[(\d+)\][ \t]*(.*)$")
_FORGED_MARKER = re.compile(r"^\s*\[\d+\]")


@dataclass(frozen=True, slots=True)
class ContextSource:
    """One numbered source of the packed context; ``marker`` None for unnumbered tool output."""

    marker: int | None
    title: str
    text: str


def format_context(sources: Sequence[ContextSource]) -> str:
    """Render sources as ``[N] title`` + body blocks separated by a blank line."""
    blocks = []
    for source in sources:
        body = "\n".join(
            "  " + line if _FORGED_MARKER.match(line) else line for line in source.text.strip().splitlines()
        )
        head = f"[{source.marker}] {source.title}".rstrip()
        blocks.append(f"{head}\n{body}" if body else head)
    return "\n\n".join(blocks)


def parse_context(text: str) -> list[ContextSource]:
    """Split tool output into sources at ``[N]`` line markers.

    Output without any marker (e.g. an agent's sql rows) becomes one unnumbered source.
    """
    sources: list[ContextSource] = []
    marker: int | None = None
    lines: list[str] = []
    seen_marker = False

    def flush() -> None:
        if marker is None:
            return
        head, body = lines[0], [line for line in lines[1:] if line.strip()]
        if body:
            sources.append(ContextSource(marker, head.strip(), "\n".join(body)))
        elif head.strip():
            sources.append(ContextSource(marker, "", head.strip()))

    for line in text.splitlines():
        match = _MARKER.match(line)
        if match:
            flush()
            seen_marker = True
            marker, lines = int(match.group(1)), [match.group(2)]
        elif marker is not None:
            lines.append(line)
    flush()
    if not seen_marker and text.strip():
        return [ContextSource(None, "", text.strip())]
    return sources
