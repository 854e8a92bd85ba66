"""The parsers' shared contract and Markdown helpers (pure)."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from io import BytesIO

from knowledge.documents import DocumentError

# Rows per Markdown table block: a long table is cut into blocks that each repeat the header row,
# so a chunk of it (the chunker packs blocks, never cuts inside one) still names its columns.
TABLE_ROWS_PER_BLOCK = 20
# An Office file is a ZIP: refuse one that inflates to more than this (a ZIP bomb).
MAX_UNZIPPED_BYTES = 512 * 2**20


class ParseError(DocumentError):
    """A file that cannot become text; ``code`` says why (too_large, corrupt, encrypted, …)."""

    def __init__(self, message: str, *, code: str = "corrupt"):
        super().__init__(message)
        self.code = code


class NeedsOcr(ParseError):
    """A PDF with no text layer (a scan): only OCR could read it."""

    def __init__(self, message: str = "the PDF has no text layer (a scan?): it needs OCR"):
        super().__init__(message, code="needs_ocr")


@dataclass(frozen=True)
class ParsedDocument:
    """A parsed file: its title and Markdown text (``#`` headings give chunks their heading path)."""

    title: str
    text: str
    format: str = ""


def cell_text(value: object) -> str:
    """One table cell on one line, pipes escaped."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = re.sub(r"\s+", " ", str(value)).strip()
    return text.replace("|", "\\|")


def markdown_table(rows: Sequence[Sequence[object]]) -> str:
    """Rows (the first one the header) → Markdown table blocks separated by blank lines."""
    cleaned = [[cell_text(c) for c in row] for row in rows]
    cleaned = [row for row in cleaned if any(row)]
    if not cleaned:
        return ""
    width = max(len(row) for row in cleaned)
    # drop columns empty in every row
    keep = [i for i in range(width) if any(i < len(row) and row[i] for row in cleaned)]
    cleaned = [[row[i] if i < len(row) else "" for i in keep] for row in cleaned]
    header, body = cleaned[0], cleaned[1:]
    head = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    if not body:
        return "\n".join(head)
    blocks = []
    for start in range(0, len(body), TABLE_ROWS_PER_BLOCK):
        lines = [*head, *("| " + " | ".join(row) + " |" for row in body[start : start + TABLE_ROWS_PER_BLOCK])]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def heading_line(level: int, text: str) -> str:
    return "#" * max(1, min(level, 6)) + " " + re.sub(r"\s+", " ", text).strip()


def check_zip(data: bytes) -> None:
    """An OOXML file must be a ZIP that does not inflate past MAX_UNZIPPED_BYTES."""
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            total = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile as exc:
        raise ParseError(f"the file is corrupt: not a valid Office Open XML package ({exc})", code="corrupt") from exc
    if total > MAX_UNZIPPED_BYTES:
        raise ParseError("the file inflates to more than 512 MB when unpacked: refused", code="too_large")
