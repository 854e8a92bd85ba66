"""Token-bounded chunking along headings and paragraphs (KS-2). Pure functions, no ORM.

A document is cut into sections at Markdown headings; a section's paragraphs are packed into
chunks of at most ``max_tokens`` (the platform's local estimate, ``achilles.llm.base``); a paragraph
longer than that is cut at sentence ends, and a sentence longer than that at word boundaries.
Every chunk carries its heading path («Title › Section › Subsection»), which is indexed with
weight A, so a chunk deep in a section still matches the words of its headings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from achilles.llm import estimate_tokens

DEFAULT_MAX_TOKENS = 300
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
HEADING_SEPARATOR = " › "


@dataclass(frozen=True)
class ChunkDraft:
    """A chunk before it is stored: ordinal, heading path and text."""

    ordinal: int
    heading: str
    text: str


def _sections(text: str, title: str) -> list[tuple[str, list[str]]]:
    """[(heading path, paragraphs)] in document order."""
    path: list[tuple[int, str]] = []
    sections: list[tuple[str, list[str]]] = []
    paragraphs: list[str] = []
    current: list[str] = []
    in_fence = False

    def heading_path() -> str:
        names = [title] if title else []
        for _, name in path:
            if not names or names[-1] != name:
                names.append(name)
        return HEADING_SEPARATOR.join(names)

    def flush_paragraph():
        if current:
            paragraph = "\n".join(current).strip()
            if paragraph:
                paragraphs.append(paragraph)
            current.clear()

    def flush_section():
        flush_paragraph()
        if paragraphs:
            sections.append((heading_path(), list(paragraphs)))
            paragraphs.clear()

    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_fence = not in_fence
            current.append(line)
            continue
        match = None if in_fence else _HEADING.match(line)
        if match:
            flush_section()
            level = len(match.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, match.group(2).strip()))
        elif not in_fence and not line.strip():
            flush_paragraph()
        else:
            current.append(line.rstrip())
    flush_section()
    return sections


def _split_long(paragraph: str, max_tokens: int) -> list[str]:
    """Cut a paragraph over budget at sentence ends, then at word boundaries."""
    if estimate_tokens(paragraph) <= max_tokens:
        return [paragraph]
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        if estimate_tokens(sentence) <= max_tokens:
            pieces.append(sentence)
            continue
        words, buf = sentence.split(), ""
        for word in words:
            candidate = f"{buf} {word}".strip()
            if buf and estimate_tokens(candidate) > max_tokens:
                pieces.append(buf)
                candidate = word
            while estimate_tokens(candidate) > max_tokens:  # one monster "word"
                cut = max(1, max_tokens * 2)
                pieces.append(candidate[:cut])
                candidate = candidate[cut:]
            buf = candidate
        if buf:
            pieces.append(buf)
    return _pack(pieces, max_tokens, " ")


def _pack(pieces: list[str], max_tokens: int, joiner: str) -> list[str]:
    """Greedily join consecutive pieces while the result stays within budget."""
    out: list[str] = []
    buf = ""
    for piece in pieces:
        candidate = f"{buf}{joiner}{piece}" if buf else piece
        if buf and estimate_tokens(candidate) > max_tokens:
            out.append(buf)
            buf = piece
        else:
            buf = candidate
    if buf:
        out.append(buf)
    return out


def chunk_text(text: str, *, title: str = "", max_tokens: int = DEFAULT_MAX_TOKENS) -> list[ChunkDraft]:
    """Split ``text`` into chunks of at most ``max_tokens`` (estimated) each; empty text → []."""
    if max_tokens < 8:
        raise ValueError("max_tokens must be at least 8")
    drafts: list[ChunkDraft] = []
    for heading, paragraphs in _sections(text, title):
        pieces = [piece for paragraph in paragraphs for piece in _split_long(paragraph, max_tokens)]
        for body in _pack(pieces, max_tokens, "\n\n"):
            drafts.append(ChunkDraft(ordinal=len(drafts), heading=heading, text=body))
    return drafts
