"""Names and titles people give things (agents, tokens, conversations, models): trimmed, and with
at least one visible character.

A name made only of spaces, zero-width characters, a byte-order mark or a right-to-left override
looks empty (or like something else) in every list it appears in. Visible means a letter, a digit,
punctuation or a symbol (Unicode categories L, N, P, S); separators (Z), controls and format
characters (C: U+200B, U+FEFF, U+202E, …) and lone combining marks do not count. Invisible
characters are trimmed from both ends; controls (newlines, tabs, NUL) and the bidirectional
embedding/override/isolate characters are refused anywhere, since they re-order or hide what
follows them.
"""

from __future__ import annotations

import unicodedata

_VISIBLE = ("L", "N", "P", "S")
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _invisible(ch: str) -> bool:
    return unicodedata.category(ch)[0] in ("Z", "C") or ch.isspace()


def name_problem(value: str) -> str | None:
    """Why ``value`` (already trimmed) is not an acceptable name, or None."""
    if any(unicodedata.category(ch) == "Cc" or ch in _BIDI_CONTROLS for ch in value):
        return "must not contain control or text-direction characters"
    if not any(unicodedata.category(ch)[0] in _VISIBLE for ch in value):
        return "must contain a visible character"
    return None


def text_problem(value: str, *, multiline: bool = False) -> str | None:
    """Why ``value`` may not be stored as a text shown to people, or None: C0/C1 controls (except
    newline, CRLF and tab when ``multiline``) and the bidirectional embedding/override/isolate
    characters are refused; the first offender is named (``U+202E``)."""
    for index, ch in enumerate(value):
        if multiline and (ch in "\n\t" or (ch == "\r" and value[index + 1 : index + 2] == "\n")):
            continue
        if ch in _BIDI_CONTROLS or unicodedata.category(ch) == "Cc":
            return f"must not contain control or text-direction characters (U+{ord(ch):04X})"
    return None


def name_clean(value: str) -> str:
    """``value`` with invisible characters trimmed from both ends; raises ``ValueError`` saying why
    it is not a name (pydantic turns it into a 422 field error)."""
    if not isinstance(value, str):
        raise ValueError("must be a string")
    start, end = 0, len(value)
    while start < end and _invisible(value[start]):
        start += 1
    while end > start and _invisible(value[end - 1]):
        end -= 1
    cleaned = value[start:end]
    problem = name_problem(cleaned)
    if problem:
        raise ValueError(problem)
    return cleaned
