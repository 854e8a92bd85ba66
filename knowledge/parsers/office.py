"""DOCX (python-docx), PPTX (python-pptx) and XLSX (openpyxl) → Markdown; all MIT-licensed.

DOCX: paragraphs and tables in document order; ``Heading N`` / ``Title`` styles become headings,
list paragraphs ``- `` items, tables Markdown tables, footnotes ``[^n]`` references and a
«Footnotes» section. PPTX: one ``##`` section per slide (its
title, or «Slide N»), text frames, tables and the speaker notes. XLSX: one ``##`` section per
sheet, the used range as a Markdown table of cell values — a formula's value as Excel last saved
it (``data_only``).
"""

from __future__ import annotations

import re
import zipfile
from io import BytesIO

import docx
import openpyxl
from docx.enum.style import WD_STYLE_TYPE
from docx.table import Table
from lxml import etree
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE

from achilles.compat import docx_cell_element
from knowledge.parsers.base import ParsedDocument, check_zip, heading_line, markdown_table

_HEADING_STYLE = re.compile(r"^(?:heading|заголовок)\s*(\d)$", re.IGNORECASE)
MAX_SHEET_ROWS = 100_000
MAX_SHEET_COLUMNS = 200

# --------------------------------------------------------------------------- DOCX


class _DocxStyles:
    """Paragraph style names by style id, read once per document: python-docx's ``paragraph.style``
    scans every style of the package for the default on each call (quadratic on a long document)."""

    def __init__(self, document):
        self.names = {style.style_id: style.name or "" for style in document.styles}
        default = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
        self.default = (default.name or "") if default is not None else ""

    def name_of(self, element) -> str:
        ppr = element.pPr
        style_id = ppr.pStyle.val if ppr is not None and ppr.pStyle is not None else None
        return self.names.get(style_id, self.default) if style_id else self.default


def _docx_heading_level(name: str) -> int | None:
    if name.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(name.strip())
    return int(match.group(1)) if match else None


def _docx_is_list(element, name: str) -> bool:
    if name.lower().startswith("list"):
        return True
    ppr = element.pPr  # numbering set on the paragraph itself (python-docx has no public API)
    return ppr is not None and ppr.numPr is not None


def _docx_table(table) -> str:
    rows = []
    for row in table.rows:
        cells, previous = [], None
        for cell in row.cells:
            # a merged cell is returned once per grid column it spans: keep it once
            element = docx_cell_element(cell)
            if previous is not None and element is previous:
                continue
            previous = element
            cells.append(cell.text)
        rows.append(cells)
    return markdown_table(rows)


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _docx_paragraph_text(element) -> str:
    """A paragraph's text in document order, a footnote reference as ``[^n]`` (python-docx's
    ``Paragraph.text`` drops references, and deleted tracked changes are ``w:delText``, not read)."""
    parts = []
    for node in element.iter(f"{_W}t", f"{_W}tab", f"{_W}br", f"{_W}cr", f"{_W}footnoteReference"):
        if node.tag == f"{_W}t":
            parts.append(node.text or "")
        elif node.tag == f"{_W}tab":
            parts.append("\t")
        elif node.tag == f"{_W}footnoteReference":
            parts.append(f"[^{node.get(f'{_W}id')}]")
        else:
            parts.append("\n")
    return "".join(parts)


def _docx_footnotes(data: bytes) -> list[str]:
    """``[^n]: text`` for each footnote of the package (the separators, ids ≤ 0, left out)."""
    with zipfile.ZipFile(BytesIO(data)) as archive:
        try:
            xml = archive.read("word/footnotes.xml")
        except KeyError:
            return []
    root = etree.fromstring(xml, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    notes = []
    for note in root.iter(f"{_W}footnote"):
        number = note.get(f"{_W}id") or ""
        if note.get(f"{_W}type") or not number.lstrip("-").isdigit() or int(number) <= 0:
            continue
        text = " ".join(re.sub(r"\s+", " ", _docx_paragraph_text(p)).strip() for p in note.iter(f"{_W}p")).strip()
        if text:
            notes.append(f"[^{number}]: {text}")
    return notes


def parse_docx(data: bytes) -> ParsedDocument:
    check_zip(data)
    document = docx.Document(BytesIO(data))
    parts: list[str] = []
    title = (document.core_properties.title or "").strip()
    items: list[str] = []

    def flush_list():
        if items:
            parts.append("\n".join(items))
            items.clear()

    styles = _DocxStyles(document)
    for element in document.element.body.iterchildren():
        tag = element.tag.rsplit("}", 1)[-1]
        if tag == "p":
            text = _docx_paragraph_text(element).strip()
            if not text:
                continue
            style = styles.name_of(element)
            level = _docx_heading_level(style)
            if level is not None:
                flush_list()
                parts.append(heading_line(level, text))
                title = title or text
            elif _docx_is_list(element, style):
                items.append("- " + re.sub(r"\s+", " ", text))
            else:
                flush_list()
                parts.append(text)
        elif tag == "tbl":
            flush_list()
            table = _docx_table(Table(element, document))
            if table:
                parts.append(table)
    flush_list()
    footnotes = _docx_footnotes(data)
    if footnotes:
        parts.append(heading_line(2, "Footnotes"))
        parts.append("\n".join(footnotes))
    return ParsedDocument(title=title, text="\n\n".join(parts), format="docx")


# --------------------------------------------------------------------------- PPTX


def _pptx_shape_texts(shape) -> list[str]:
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        return [text for child in shape.shapes for text in _pptx_shape_texts(child)]
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
        table = markdown_table(rows)
        return [table] if table else []
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        paragraphs = [p.text.strip() for p in shape.text_frame.paragraphs]
        text = "\n".join(p for p in paragraphs if p)
        return [text] if text else []
    return []


def parse_pptx(data: bytes) -> ParsedDocument:
    check_zip(data)
    presentation = Presentation(BytesIO(data))
    title = (presentation.core_properties.title or "").strip()
    parts: list[str] = []
    for number, slide in enumerate(presentation.slides, start=1):
        title_shape = slide.shapes.title
        slide_title = title_shape.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        parts.append(heading_line(2, f"Slide {number}: {slide_title}" if slide_title else f"Slide {number}"))
        title = title or slide_title
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            parts.extend(_pptx_shape_texts(shape))
        if slide.has_notes_slide:
            notes = (
                (slide.notes_slide.notes_text_frame.text or "").strip() if slide.notes_slide.notes_text_frame else ""
            )
            if notes:
                parts.append(f"Notes: {notes}")
    return ParsedDocument(title=title, text="\n\n".join(parts), format="pptx")


# --------------------------------------------------------------------------- XLSX


def parse_xlsx(data: bytes) -> ParsedDocument:
    check_zip(data)
    workbook = openpyxl.load_workbook(BytesIO(data), read_only=True, data_only=True)
    try:
        title = (workbook.properties.title or "").strip()
        parts: list[str] = []
        for sheet in workbook.worksheets:
            rows = []
            for index, row in enumerate(sheet.iter_rows(values_only=True)):
                if index >= MAX_SHEET_ROWS:
                    break
                rows.append(list(row[:MAX_SHEET_COLUMNS]))
            table = markdown_table(rows)
            if table:
                parts.append(heading_line(2, sheet.title))
                parts.append(table)
    finally:
        workbook.close()
    return ParsedDocument(title=title, text="\n\n".join(parts), format="xlsx")
