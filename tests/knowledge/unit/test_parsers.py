"""The upload parsers on files made here: each format becomes the right Markdown, with headings
(the chunks' heading path) and tables; a broken file gets its own clear error."""

from __future__ import annotations

import io

import pytest

from knowledge.chunking import chunk_text
from knowledge.parsers import NeedsOcr, ParseError, parse_file
from tests.knowledge.files import PdfText, grid, pdf_bytes

MB = 2**20


def _parse(data: bytes, filename: str):
    return parse_file(data, filename=filename, max_bytes=50 * MB)


def _docx_with_table() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Командировки", 1)
    document.add_paragraph("Заявку подают за пять рабочих дней.")
    document.add_heading("Суточные", 2)
    document.add_paragraph("Москва и Петербург", style="List Bullet")
    document.add_paragraph("Другие города", style="List Bullet")
    table = document.add_table(rows=3, cols=2)
    for row, (city, amount) in enumerate([("Город", "Суточные"), ("Москва", "1500 ₽"), ("Казань", "900 ₽")]):
        table.cell(row, 0).text = city
        table.cell(row, 1).text = amount
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_pdf_headings_from_font_sizes_paragraphs_and_a_table():
    data = pdf_bytes(
        [
            [
                PdfText(72, 720, "Vacation policy", 24),
                PdfText(72, 690, "Every employee gets 28 calendar days.", 11),
                PdfText(72, 677, "They may be split.", 11),
                PdfText(72, 650, "Approval", 16),
                PdfText(72, 630, "The manager approves the dates.", 11),
                PdfText(76, 606, "Grade"),
                PdfText(176, 606, "Days"),
                PdfText(76, 586, "Junior"),
                PdfText(176, 586, "28"),
            ],
            [PdfText(72, 720, "Carry-over", 16), PdfText(72, 700, "Unused days carry over once.", 11)],
        ],
        grids=[grid(72, 620, [100, 100], 2)],
    )

    parsed = _parse(data, "vacation.pdf")

    assert parsed.title == "Vacation policy"
    assert parsed.text.splitlines()[0] == "# Vacation policy"
    assert "Every employee gets 28 calendar days. They may be split." in parsed.text
    assert "## Approval" in parsed.text and "## Carry-over" in parsed.text
    assert "| Grade | Days |\n| --- | --- |\n| Junior | 28 |" in parsed.text
    headings = {c.heading for c in chunk_text(parsed.text, title=parsed.title)}
    assert "Vacation policy › Approval" in headings and "Vacation policy › Carry-over" in headings


def test_pdf_without_a_text_layer_needs_ocr():
    with pytest.raises(NeedsOcr) as error:
        _parse(pdf_bytes([[], []]), "scan.pdf")
    assert error.value.code == "needs_ocr"


def test_encrypted_pdf_is_refused_with_its_reason():
    with pytest.raises(ParseError) as error:
        _parse(pdf_bytes([[PdfText(72, 700, "secret words here")]], encrypt=True), "locked.pdf")
    assert error.value.code == "encrypted" and "password" in str(error.value)


@pytest.mark.parametrize(
    ("filename", "data"),
    [("broken.pdf", b"%PDF-1.4\nnot really"), ("broken.docx", b"PK\x03\x04 broken"), ("broken.xlsx", b"hello")],
)
def test_corrupt_file_is_a_corrupt_error(filename, data):
    with pytest.raises(ParseError) as error:
        _parse(data, filename)
    assert error.value.code == "corrupt" and "corrupt" in str(error.value)


def test_old_binary_or_encrypted_office_file_is_refused():
    with pytest.raises(ParseError) as error:
        _parse(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "budget.xlsx")
    assert error.value.code == "encrypted"


def test_oversized_and_unsupported_files():
    with pytest.raises(ParseError) as too_large:
        parse_file(b"x" * 2048, filename="big.txt", max_bytes=1024)
    with pytest.raises(ParseError) as unsupported:
        _parse(b"MZ...", "setup.exe")
    assert too_large.value.code == "too_large"
    assert unsupported.value.code == "unsupported_format"


def test_docx_headings_lists_and_table():
    parsed = _parse(_docx_with_table(), "trips.docx")

    assert parsed.title == "Командировки"
    assert parsed.text == (
        "# Командировки\n\nЗаявку подают за пять рабочих дней.\n\n## Суточные\n\n- Москва и Петербург\n"
        "- Другие города\n\n| Город | Суточные |\n| --- | --- |\n| Москва | 1500 ₽ |\n| Казань | 900 ₽ |"
    )
    chunks = chunk_text(parsed.text, title=parsed.title)
    assert any(c.heading == "Командировки › Суточные" and "| Казань | 900 ₽ |" in c.text for c in chunks)


def test_pptx_one_section_per_slide_with_notes_and_tables():
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    first = presentation.slides.add_slide(presentation.slide_layouts[1])
    first.shapes.title.text = "Итоги квартала"
    first.placeholders[1].text = "Выручка выросла на 12 %"
    first.notes_slide.notes_text_frame.text = "Рассказать про новый склад"
    second = presentation.slides.add_slide(presentation.slide_layouts[5])
    second.shapes.title.text = "Планы"
    table = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for (row, col), text in {(0, 0): "Проект", (0, 1): "Срок", (1, 0): "Склад", (1, 1): "Май"}.items():
        table.cell(row, col).text = text
    out = io.BytesIO()
    presentation.save(out)

    parsed = _parse(out.getvalue(), "q3.pptx")

    assert parsed.title == "Итоги квартала"
    assert parsed.text == (
        "## Slide 1: Итоги квартала\n\nВыручка выросла на 12 %\n\nNotes: Рассказать про новый склад\n\n"
        "## Slide 2: Планы\n\n| Проект | Срок |\n| --- | --- |\n| Склад | Май |"
    )


def test_xlsx_each_sheet_a_table_with_formula_values():
    import xlsxwriter

    out = io.BytesIO()
    workbook = xlsxwriter.Workbook(out)
    budget = workbook.add_worksheet("Бюджет")
    budget.write_row(0, 0, ["Статья", "Сумма"])
    budget.write_row(1, 0, ["Аренда", 100])
    budget.write_row(2, 0, ["Связь", 50.5])
    budget.write(3, 0, "Итого")
    budget.write_formula(3, 1, "=SUM(B2:B3)", None, 150.5)  # the value Excel would have saved
    staff = workbook.add_worksheet("Штат")
    staff.write_row(0, 0, ["Отдел", "Люди"])
    staff.write_row(1, 0, ["ИТ", 12])
    workbook.close()

    parsed = _parse(out.getvalue(), "budget.xlsx")

    assert parsed.text == (
        "## Бюджет\n\n| Статья | Сумма |\n| --- | --- |\n| Аренда | 100 |\n| Связь | 50.5 |\n| Итого | 150.5 |\n\n"
        "## Штат\n\n| Отдел | Люди |\n| --- | --- |\n| ИТ | 12 |"
    )


def test_long_tables_repeat_their_header_in_every_block():
    rows = "\n".join(f"{i},value {i}" for i in range(45))
    parsed = _parse(("id,name\n" + rows).encode(), "long.csv")

    blocks = parsed.text.split("\n\n")
    assert len(blocks) == 3 and all(block.startswith("| id | name |\n| --- | --- |") for block in blocks)


@pytest.mark.parametrize("encoding", ["utf-8", "cp1251", "koi8_r"])
def test_russian_text_in_each_encoding(encoding):
    text = "Порядок оформления командировки\n\nСотрудник подаёт заявку за пять рабочих дней до поездки."

    parsed = _parse(text.encode(encoding), "trips.txt")

    assert parsed.text == text
    assert parsed.title == "Порядок оформления командировки"


def test_csv_in_cp1251_with_semicolons():
    parsed = _parse("Фамилия;Отдел\nИванов;Бухгалтерия\n".encode("cp1251"), "staff.csv")

    assert parsed.text == "| Фамилия | Отдел |\n| --- | --- |\n| Иванов | Бухгалтерия |"


def test_markdown_and_html_take_the_existing_path():
    markdown = _parse("---\ntitle: Регламент\nacl: [everyone]\n---\n# Раздел\n\nТекст.".encode(), "r.md")
    html = _parse("<html><title>Страница</title><body><h2>Раздел</h2><p>Текст</p></body></html>".encode(), "p.html")

    assert (markdown.title, markdown.text) == ("Регламент", "# Раздел\n\nТекст.")  # front matter's ACL ignored
    assert (html.title, html.text) == ("Страница", "## Раздел\n\nТекст")


def _with_footnote(docx_bytes_of, text: str) -> bytes:
    """A DOCX whose first body paragraph cites footnote 1 (``text``), as Word writes it."""
    import zipfile

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    footnotes = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes xmlns:w="{w}">'
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
        '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
        f'</w:footnote><w:footnote w:id="1"><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:footnote></w:footnotes>'
    )
    source = zipfile.ZipFile(io.BytesIO(docx_bytes_of))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        target.writestr("word/footnotes.xml", footnotes)
    return out.getvalue()


def test_docx_footnotes_keep_their_reference_and_text():
    import docx
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = docx.Document()
    paragraph = document.add_paragraph("Суточные выплачивают заранее")
    reference = OxmlElement("w:footnoteReference")
    reference.set(qn("w:id"), "1")
    paragraph.add_run()._r.append(reference)
    out = io.BytesIO()
    document.save(out)

    parsed = _parse(_with_footnote(out.getvalue(), "По приказу № 12 от 1 марта."), "trips.docx")

    assert parsed.text == ("Суточные выплачивают заранее[^1]\n\n## Footnotes\n\n[^1]: По приказу № 12 от 1 марта.")


def test_eml_headers_body_and_attachments_each_a_section():
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = "Командировка в Казань"
    message["From"] = "Анна <anna@example.com>"
    message["To"] = "hr@example.com"
    message.set_content("Добрый день!\n\nПрикладываю правила и смету.")
    message.add_attachment(_docx_with_table(), maintype="application", subtype="octet-stream", filename="trips.docx")
    message.add_attachment("Статья;Сумма\nГостиница;4000\n".encode("cp1251"), maintype="text", subtype="csv",
                           filename="смета.csv")  # fmt: skip
    message.add_attachment(b"PK\x03\x04 broken", maintype="application", subtype="zip", filename="broken.xlsx")

    parsed = _parse(message.as_bytes(), "letter.eml")

    assert parsed.title == "Командировка в Казань"
    assert parsed.text.startswith("From: Анна <anna@example.com>\nTo: hr@example.com\n\nДобрый день!")
    assert "## Attachment: trips.docx\n\n### Командировки" in parsed.text
    assert "#### Суточные" in parsed.text and "| Казань | 900 ₽ |" in parsed.text
    assert "## Attachment: смета.csv\n\n| Статья | Сумма |\n| --- | --- |\n| Гостиница | 4000 |" in parsed.text
    assert "## Attachment: broken.xlsx\n\n(could not be read: the file is corrupt" in parsed.text


def test_a_long_docx_parses_in_linear_time():
    """Failed before the fix: python-docx's ``paragraph.style`` scans every style for the default on
    each call, so 400 paragraphs took ~8 s (bench/ingest); the style names are now read once."""
    import time

    import docx

    document = docx.Document()
    for i in range(400):
        document.add_paragraph(f"Абзац {i}", style="List Bullet" if i % 7 == 0 else None)
    out = io.BytesIO()
    document.save(out)
    started = time.process_time()
    parsed = _parse(out.getvalue(), "long.docx")
    assert parsed.text.count("Абзац") == 400 and "- Абзац 7" in parsed.text
    assert time.process_time() - started < 2.0  # linear: ~0.1 s; quadratic was ~8 s
