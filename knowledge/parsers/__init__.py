"""Uploaded files → Markdown text with headings (pure: no ORM, no network, no torch).

``parse_file(data, filename=…, max_bytes=…)`` picks a parser by the file's extension and returns a
:class:`ParsedDocument`: a title and Markdown whose ``#`` headings the chunker turns into each
chunk's heading path (``knowledge.chunking``). Every format renders tables as Markdown tables (in
row groups that repeat the header, so each chunk of a long table still says what its columns are).

E-mail (``.eml``) has its body and every readable attachment as sections.
A file that cannot become text raises :class:`ParseError` with a stable ``code`` and a reason for
people: ``too_large``, ``unsupported_format``, ``corrupt``, ``encrypted``, ``empty_document``; a PDF
without a text layer raises :class:`NeedsOcr` (a scanned document: OCR is a later step).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath

from knowledge.parsers import mail, office, text
from knowledge.parsers.base import NeedsOcr, ParsedDocument, ParseError
from knowledge.parsers.pdf import parse_pdf

__all__ = ["SUPPORTED_UPLOAD_SUFFIXES", "NeedsOcr", "ParseError", "ParsedDocument", "format_of", "parse_file"]

# extension → format name (the parsers below; the README's table of supported formats)
FORMATS: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".csv": "csv",
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".eml": "eml",
}
SUPPORTED_UPLOAD_SUFFIXES = frozenset(FORMATS)

# What an old binary Office file or an encrypted OOXML one starts with (an OLE compound file).
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def format_of(filename: str) -> str:
    """The format of a file by its extension; unknown → ParseError ``unsupported_format``."""
    suffix = PurePath(filename).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(sorted(SUPPORTED_UPLOAD_SUFFIXES))
        raise ParseError(
            f"«{suffix or filename}» files are not supported (supported: {known})", code="unsupported_format"
        )
    return FORMATS[suffix]


_PARSERS: dict[str, Callable[[bytes], ParsedDocument]] = {
    "pdf": parse_pdf,
    "docx": office.parse_docx,
    "pptx": office.parse_pptx,
    "xlsx": office.parse_xlsx,
    "csv": text.parse_csv,
    "text": text.parse_text,
    "markdown": text.parse_markdown,
    "html": text.parse_html,
    "eml": lambda data: mail.parse_eml(data, parse_attachment=_attachment),
}


def parse_file(data: bytes, *, filename: str, max_bytes: int) -> ParsedDocument:
    """Parse one uploaded file; raises ParseError (NeedsOcr for a PDF with no text layer)."""
    fmt = format_of(filename)
    if len(data) > max_bytes:
        raise ParseError(
            f"the file is {len(data) / 2**20:.1f} MB, over the limit of {max_bytes / 2**20:.0f} MB", code="too_large"
        )
    if not data:
        raise ParseError("the file is empty", code="empty_document")
    if fmt in {"docx", "pptx", "xlsx"} and data.startswith(_OLE_MAGIC):
        raise ParseError(
            "the file is password-protected or in an old binary Office format (.doc/.xls/.ppt): "
            "remove the password or save it as .docx/.xlsx/.pptx",
            code="encrypted",
        )
    try:
        parsed = _PARSERS[fmt](data)
    except ParseError:
        raise
    except Exception as exc:  # each library has its own zoo of exceptions for a broken file
        raise ParseError(
            f"the {fmt.upper()} file is corrupt or unreadable ({exc.__class__.__name__}: {exc})"[:500], code="corrupt"
        ) from exc
    if not parsed.text.strip():
        raise ParseError("no text found in the file", code="empty_document")
    title = parsed.title.strip() or PurePath(filename).stem
    return ParsedDocument(title=title[:500], text=parsed.text.strip(), format=fmt)


def _attachment(data: bytes, filename: str) -> ParsedDocument:
    """An e-mail's attachment, by the same parsers (a message attached to a message is not opened:
    no recursion a crafted file could deepen)."""
    if format_of(filename) == "eml":
        raise ParseError("a message attached to a message is not read", code="unsupported_format")
    return parse_file(data, filename=filename, max_bytes=len(data) + 1)
