"""Office files made in the test itself (no binaries in the repository): a tiny hand-written PDF
and DOCX / PPTX / XLSX written with the libraries that read them."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PdfText:
    """One line of text at (x, y) points from the bottom left, in Helvetica of ``size`` points."""

    x: float
    y: float
    text: str
    size: float = 11


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def pdf_bytes(
    pages: Sequence[Sequence[PdfText]],
    *,
    grids: Sequence[Sequence[tuple[float, float, float, float]]] = (),
    encrypt: bool = False,
) -> bytes:
    """A valid PDF: one page per item of ``pages`` (Latin-1 text, Helvetica), and per page the
    rectangles (x, y, width, height) of ``grids`` stroked as lines (a table's cells)."""
    objects: list[str] = []
    kids = []
    font_id = 3
    objects.append("<< /Type /Catalog /Pages 2 0 R >>")
    objects.append("")  # the page tree, filled in below
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for index, lines in enumerate(pages):
        ops = []
        for rect in grids[index] if index < len(grids) else ():
            ops.append("{:.1f} {:.1f} {:.1f} {:.1f} re S".format(*rect))
        for line in lines:
            ops.append(f"BT /F1 {line.size} Tf {line.x} {line.y} Td {_pdf_string(line.text)} Tj ET")
        stream = "\n".join(ops)
        objects.append(f"<< /Length {len(stream.encode('latin-1'))} >>\nstream\n{stream}\nendstream")
        content_id = len(objects)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>"
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    if encrypt:  # an (empty-password) Standard security handler entry: readers must decrypt
        objects.append("<< /Filter /Standard /V 1 /R 2 /O <" + "00" * 32 + "> /U <" + "00" * 32 + "> /P -4 >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    trailer = f"/Size {len(objects) + 1} /Root 1 0 R"
    if encrypt:
        trailer += f" /Encrypt {len(objects)} 0 R /ID [<{'ab' * 16}> <{'ab' * 16}>]"
    out.write(f"trailer\n<< {trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def grid(x: float, top: float, widths: Sequence[float], rows: int, height: float = 20) -> list[tuple]:
    """The cell rectangles of a table whose top edge is at ``top``."""
    cells = []
    for row in range(rows):
        left = x
        for width in widths:
            cells.append((left, top - (row + 1) * height, width, height))
            left += width
    return cells


FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # Debian's fonts-dejavu-core


def scanned_pdf(pages: Sequence[Sequence[str]]) -> bytes:
    """A PDF of page images only (no text layer), as a scanner makes: each page's lines drawn in
    DejaVu Sans at 150 dpi with Pillow."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(FONT, 40)
    images = []
    for lines in pages:
        image = Image.new("L", (1275, 1650), 255)
        draw = ImageDraw.Draw(image)
        for index, line in enumerate(lines):
            draw.text((100, 150 + index * 60), line, font=font, fill=0)
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=150, save_all=True, append_images=images[1:])
    return out.getvalue()


@dataclass(frozen=True)
class Sample:
    """A file of the end-to-end upload tests, with a question only it answers."""

    filename: str
    data: bytes
    question: str
    fact: str  # words the answer quotes from this file


def docx_with_table() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Суточные в командировках", 1)
    document.add_paragraph("Суточные зависят от города командировки.")
    table = document.add_table(rows=3, cols=2)
    for row, cells in enumerate([("Город", "Суточные"), ("Казань", "900 рублей"), ("Москва", "1500 рублей")]):
        for col, text in enumerate(cells):
            table.cell(row, col).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx_with_notes() -> bytes:
    import pptx

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = "Итоги квартала"
    slide.placeholders[1].text = "Выручка квартала выросла на 12 процентов."
    slide.notes_slide.notes_text_frame.text = "Рассказать про новый склад в Твери."
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def xlsx_with_formula() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Бюджет офиса"
    for row in [("Статья", "Сумма"), ("Аренда офиса", 100500), ("Уборка офиса", 20000)]:
        sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def upload_samples() -> list[Sample]:
    """A PDF (text layer and a table), a DOCX with a table, a PPTX, an XLSX, a cp1251 text and a
    scanned PDF (OCR): each with a fact the others do not hold."""
    pdf = pdf_bytes(
        [
            [
                PdfText(72, 720, "Parking rules", size=20),
                PdfText(72, 690, "Every employee may park two cars in zone B of the garage."),
            ]
        ]
    )
    return [
        Sample("parking.pdf", pdf, "How many cars may an employee park in zone B of the garage?", "zone B"),
        Sample("per-diem.docx", docx_with_table(), "Какие суточные в командировке в Казань?", "900 рублей"),
        Sample("quarter.pptx", pptx_with_notes(), "На сколько процентов выросла выручка квартала?", "12 процентов"),
        Sample("budget.xlsx", xlsx_with_formula(), "Сколько стоит аренда офиса в бюджете?", "100500"),
        Sample(
            "badge.txt",
            "Пропуск в офис\n\nПропуск в офис выдаёт служба охраны на третьем этаже.".encode("cp1251"),
            "Кто выдаёт пропуск в офис?",
            "служба охраны",
        ),
        Sample(
            "fire-drill.pdf",
            scanned_pdf([["Пожарная тревога", "Место сбора у северного входа."]]),
            "Где место сбора при пожарной тревоге?",
            "северного входа",
        ),
    ]


CORRUPT = ("broken.docx", b"PK\x03\x04 this is not a real Word file")
