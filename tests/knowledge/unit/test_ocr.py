"""OCR of scanned PDFs with the Tesseract CLI (skipped where Tesseract or the font is missing)."""

from __future__ import annotations

import os

import pytest

from knowledge.parsers import NeedsOcr, ParseError, parse_file
from knowledge.parsers.ocr import ocr_available, ocr_pdf
from tests.knowledge.files import FONT, scanned_pdf

pytestmark = pytest.mark.skipif(
    not (ocr_available() and os.path.exists(FONT)), reason="needs tesseract-ocr (make ocr-deps) and DejaVu fonts"
)


def test_a_scan_has_no_text_layer_and_ocr_reads_it_in_russian():
    data = scanned_pdf([["Регламент пропусков", "", "Гостевой пропуск заказывают", "за один рабочий день до визита."]])
    with pytest.raises(NeedsOcr):
        parse_file(data, filename="scan.pdf", max_bytes=2**30)

    parsed = ocr_pdf(data)

    assert parsed.title == "Регламент пропусков"
    assert parsed.text == "Регламент пропусков\n\nГостевой пропуск заказывают за один рабочий день до визита."


def test_a_scan_of_several_pages_has_a_section_per_page():
    parsed = ocr_pdf(scanned_pdf([["Первая страница"], ["Second page"]]))

    assert parsed.text == "## Page 1\n\nПервая страница\n\n## Page 2\n\nSecond page"


def test_blank_scans_and_too_many_pages():
    with pytest.raises(ParseError) as blank:
        ocr_pdf(scanned_pdf([[]]))
    with pytest.raises(NeedsOcr):
        ocr_pdf(scanned_pdf([["a"], ["b"]]), max_pages=1)
    assert blank.value.code == "empty_document"
