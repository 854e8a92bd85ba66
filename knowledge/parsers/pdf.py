"""PDF text layer → Markdown (pdfplumber over pdfminer.six, both MIT).

Tables pdfplumber finds (ruled cells) become Markdown tables in place; the rest is read line by
line. Headings come from font sizes: the body size is the size most characters are set in, and a
line set clearly larger (≥ 1.2×) is a heading, its level the rank of its size among the heading
sizes of the document (largest = ``#``). A document with almost no characters has no text layer:
:class:`NeedsOcr`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from io import BytesIO

import pdfplumber
from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect

from knowledge.parsers.base import NeedsOcr, ParsedDocument, ParseError, heading_line, markdown_table

HEADING_RATIO = 1.2
MIN_TEXT_CHARS = 16  # fewer characters of text in the whole file: a scan
MAX_PAGES = 5000


@dataclass
class _Line:
    top: float
    bottom: float
    size: float
    text: str


def _lines(words: list[dict]) -> list[_Line]:
    """Words → lines: words whose tops are within a third of their height share a line."""
    lines: list[_Line] = []
    current: list[dict] = []
    for word in sorted(words, key=lambda w: (round(w["top"]), w["x0"])):
        if current and abs(word["top"] - current[0]["top"]) > max(2.0, (current[0]["bottom"] - current[0]["top"]) / 3):
            lines.append(_line(current))
            current = []
        current.append(word)
    if current:
        lines.append(_line(current))
    return lines


def _line(words: list[dict]) -> _Line:
    words = sorted(words, key=lambda w: w["x0"])
    sizes = [float(w.get("size") or (w["bottom"] - w["top"])) for w in words]
    return _Line(
        top=min(w["top"] for w in words),
        bottom=max(w["bottom"] for w in words),
        size=round(statistics.median(sizes), 1),
        text=" ".join(w["text"] for w in words),
    )


def _inside(word: dict, bbox: tuple[float, float, float, float]) -> bool:
    x0, top, x1, bottom = bbox
    mid_x, mid_y = (word["x0"] + word["x1"]) / 2, (word["top"] + word["bottom"]) / 2
    return x0 <= mid_x <= x1 and top <= mid_y <= bottom


def parse_pdf(data: bytes) -> ParsedDocument:
    try:
        pdf = pdfplumber.open(BytesIO(data))
    except Exception as exc:
        # pdfplumber wraps pdfminer's exception in its own PdfminerException
        cause = exc.args[0] if exc.args and isinstance(exc.args[0], Exception) else exc
        if isinstance(cause, PDFPasswordIncorrect | PDFEncryptionError):
            raise ParseError(
                "the PDF is password-protected: remove the password and upload it again", code="encrypted"
            ) from exc
        raise ParseError(f"the PDF is corrupt ({cause.__class__.__name__}: {cause})"[:500], code="corrupt") from exc
    with pdf:
        if len(pdf.pages) > MAX_PAGES:
            raise ParseError(f"the PDF has {len(pdf.pages)} pages, over the limit of {MAX_PAGES}", code="too_large")
        # per page: [(top, kind, payload)] with kind "line" or "table"
        pages: list[list[tuple[float, str, object]]] = []
        sizes: Counter[float] = Counter()
        chars = 0
        for page in pdf.pages:
            tables = [t for t in page.find_tables() if len(t.rows) >= 1]
            words = page.extract_words(extra_attrs=["size"], keep_blank_chars=False, use_text_flow=False)
            chars += sum(len(w["text"]) for w in words)
            free = [w for w in words if not any(_inside(w, t.bbox) for t in tables)]
            blocks: list[tuple[float, str, object]] = []
            for line in _lines(free):
                sizes[line.size] += len(line.text)
                blocks.append((line.top, "line", line))
            for table in tables:
                blocks.append((table.bbox[1], "table", table.extract()))
            blocks.sort(key=lambda b: b[0])
            pages.append(blocks)
        title = str((pdf.metadata or {}).get("Title") or "").strip()
    if chars < MIN_TEXT_CHARS:
        raise NeedsOcr()
    body_size = sizes.most_common(1)[0][0] if sizes else 0.0
    heading_sizes = sorted({s for s in sizes if body_size and s >= body_size * HEADING_RATIO}, reverse=True)
    level_of = {size: index + 1 for index, size in enumerate(heading_sizes[:6])}
    out: list[str] = []
    paragraph: list[str] = []
    previous: _Line | None = None

    def flush():
        if paragraph:
            out.append(" ".join(paragraph))
            paragraph.clear()

    for blocks in pages:
        previous = None
        for _, kind, payload in blocks:
            if kind == "table":
                flush()
                rendered = markdown_table(payload)  # type: ignore[arg-type]
                if rendered:
                    out.append(rendered)
                previous = None
                continue
            assert isinstance(payload, _Line)
            line = payload
            level = level_of.get(line.size)
            if level is not None:
                flush()
                out.append(heading_line(level, line.text))
                title = title or line.text
                previous = None
                continue
            height = line.bottom - line.top
            if previous is not None and line.top - previous.bottom > height * 0.8:
                flush()  # a blank line's worth of space: a new paragraph
            paragraph.append(line.text)
            previous = line
        flush()
    return ParsedDocument(title=title, text="\n\n".join(out), format="pdf")
