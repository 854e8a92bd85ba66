"""A thread exported as Markdown or PDF, the cited sources as footnotes.

Pure over plain data (``ExportThread``): what goes in is already cut to what the exporter may read
(``available: False`` sources carry no title nor link and come out as «источник недоступен»). The
``[N]`` markers of each answer become document-wide footnote numbers (``[^3]`` in Markdown, a
superscript in the PDF), since each answer numbers its sources from 1. The PDF is drawn with
ReportLab (BSD) in DejaVu Sans, a font with Cyrillic (Debian's ``fonts-dejavu-core``).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from xml.sax.saxutils import escape

from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.platypus import Paragraph, Preformatted, SimpleDocTemplate, Spacer

UNAVAILABLE = "источник недоступен"
UNTITLED = "Без названия"

# Debian's fonts-dejavu-core (make pdf-deps); the first that exists is used.
FONT_CANDIDATES = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/TTF/DejaVuSans.ttf"),
    Path("/usr/local/share/fonts/DejaVuSans.ttf"),
)


@dataclass(frozen=True)
class ExportSource:
    markers: tuple[int, ...]
    title: str
    url: str
    available: bool


@dataclass(frozen=True)
class ExportMessage:
    role: str  # user | assistant
    content: str
    sources: tuple[ExportSource, ...] = ()
    state: str = "complete"


@dataclass(frozen=True)
class ExportThread:
    title: str
    exported_at: datetime
    exported_by: str
    messages: tuple[ExportMessage, ...]


@dataclass
class _Footnotes:
    """Document-wide footnote numbers for each answer's own ``[N]`` markers."""

    lines: list[tuple[int, str, str]] = field(default_factory=list)  # (number, title, url)

    def for_answer(self, message: ExportMessage) -> dict[int, int]:
        numbers: dict[int, int] = {}
        for source in sorted(message.sources, key=lambda s: min(s.markers, default=0)):
            title = (source.title or UNTITLED) if source.available else UNAVAILABLE
            url = source.url if source.available else ""
            for marker in source.markers:
                number = len(self.lines) + 1
                self.lines.append((number, title, url))
                numbers[marker] = number
        return numbers


# Outside code (fences and spans) only a cited source's own number is a marker.
_CODE = re.compile(r"(```[\s\S]*?```|`[^`\n]*`)")
_MARKER = re.compile(r" ?\[(\d{1,3})\]")


def _replace_markers(text: str, numbers: dict[int, int], render) -> str:
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = _MARKER.sub(
            lambda m: render(numbers[int(m.group(1))]) if int(m.group(1)) in numbers else m.group(0), parts[i]
        )
    return "".join(parts)


_STATE_NOTE = {"failed": "Ответ не получен — ошибка при генерации.", "interrupted": "Ответ прерван."}


def thread_markdown(thread: ExportThread) -> str:
    notes = _Footnotes()
    out = [f"# {thread.title or UNTITLED}", ""]
    out += [f"_Экспорт из Achilles: {thread.exported_by}, {thread.exported_at:%d.%m.%Y %H:%M %Z}._".strip(), ""]
    for message in thread.messages:
        if message.role == "user":
            out += ["**Вопрос:**", "", message.content.strip(), ""]
            continue
        numbers = notes.for_answer(message)
        text = _replace_markers(message.content.strip(), numbers, lambda n: f"[^{n}]")
        out += ["**Ответ:**", "", text or "—", ""]
        if message.state in _STATE_NOTE:
            out += [f"_{_STATE_NOTE[message.state]}_", ""]
    if notes.lines:
        out += ["---", ""]
        for number, title, url in notes.lines:
            out.append(f"[^{number}]: {title}" + (f" — <{url}>" if url else ""))
        out.append("")
    return "\n".join(out)


def _font() -> str:
    if "DejaVuSans" in pdfmetrics.getRegisteredFontNames():
        return "DejaVuSans"
    for path in FONT_CANDIDATES:
        if path.exists():
            pdfmetrics.registerFont(TTFont("DejaVuSans", str(path)))
            return "DejaVuSans"
    raise FileNotFoundError("no DejaVu Sans font for the PDF export (Debian: fonts-dejavu-core, `make pdf-deps`)")


def thread_pdf(thread: ExportThread) -> bytes:
    font = _font()
    body = ParagraphStyle("body", fontName=font, fontSize=10.5, leading=14, spaceAfter=4)
    styles = {
        "title": ParagraphStyle("title", parent=body, fontSize=16, leading=20, spaceAfter=6),
        "meta": ParagraphStyle("meta", parent=body, fontSize=8.5, textColor="#555555", spaceAfter=10),
        "label": ParagraphStyle("label", parent=body, fontSize=9, textColor="#555555", spaceBefore=8, spaceAfter=2),
        "note": ParagraphStyle("note", parent=body, fontSize=8.5, leading=11, spaceAfter=1),
        "code": ParagraphStyle("code", parent=body, fontSize=8.5, leading=11, backColor="#f2f2f2"),
    }
    notes = _Footnotes()
    story: list = [
        Paragraph(escape(thread.title or UNTITLED), styles["title"]),
        Paragraph(
            escape(f"Экспорт из Achilles: {thread.exported_by}, {thread.exported_at:%d.%m.%Y %H:%M %Z}".strip()),
            styles["meta"],
        ),
    ]
    for message in thread.messages:
        if message.role == "user":
            story += [Paragraph("Вопрос", styles["label"]), *_paragraphs(message.content, {}, body, styles["code"])]
            continue
        first = len(notes.lines)
        numbers = notes.for_answer(message)
        story += [Paragraph("Ответ", styles["label"]), *_paragraphs(message.content, numbers, body, styles["code"])]
        if message.state in _STATE_NOTE:
            story.append(Paragraph(escape(_STATE_NOTE[message.state]), styles["meta"]))
        for number, title, url in notes.lines[first:]:
            line = f"<super>{number}</super> {escape(title)}" + (f" — {escape(url)}" if url else "")
            story.append(Paragraph(line, styles["note"]))
        story.append(Spacer(1, 4 * mm))
    buffer = io.BytesIO()
    doc = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        title=thread.title or UNTITLED,
        author=thread.exported_by,
        leftMargin=18 * mm,
        rightMargin=18 * mm,
        topMargin=16 * mm,
        bottomMargin=16 * mm,
    )
    doc.build(story)
    return buffer.getvalue()


def _paragraphs(text: str, numbers: dict[int, int], style, code_style) -> list:
    """Markdown text as ReportLab flowables: code blocks as they are, other blocks as paragraphs
    (escaped: ReportLab reads its own markup), the markers as superscript footnote numbers."""

    flowables: list = []
    for i, part in enumerate(re.split(r"```[^\n]*\n?([\s\S]*?)```", text.strip())):
        if i % 2:
            flowables.append(Preformatted(part.rstrip("\n"), code_style))
            continue
        for block in re.split(r"\n\s*\n", part):
            if not block.strip():
                continue
            marked = _replace_markers(escape(block.strip()), numbers, lambda n: f"<super>{n}</super>")
            flowables.append(Paragraph(marked.replace("\n", "<br/>"), style))
    return flowables or [Paragraph("—", style)]
