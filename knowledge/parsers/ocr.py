"""OCR of a scanned PDF: each page rendered with pdfium (pypdfium2), read by the Tesseract CLI
(Debian's ``tesseract-ocr`` with ``tesseract-ocr-rus``; Apache-2.0). Pure: no ORM, no network.

Used only for a PDF the text-layer parser found no text in (:class:`NeedsOcr`). Without the
``tesseract`` binary :func:`ocr_available` is False and the document stays ``needs_ocr``.
"""

from __future__ import annotations

import shutil
import subprocess
from io import BytesIO

import pypdfium2

from knowledge.parsers.base import NeedsOcr, ParsedDocument, ParseError, heading_line

OCR_DPI = 300  # what Tesseract is trained for; lower loses small print
PAGE_TIMEOUT_SECONDS = 120


def ocr_available() -> bool:
    return shutil.which("tesseract") is not None


def _page_png(page: pypdfium2.PdfPage) -> bytes:
    image = page.render(scale=OCR_DPI / 72, grayscale=True).to_pil()
    out = BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _tesseract(png: bytes, languages: str) -> str:
    try:
        done = subprocess.run(
            ["tesseract", "stdin", "stdout", "-l", languages, "--psm", "3"],
            input=png,
            capture_output=True,
            timeout=PAGE_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ParseError(f"OCR of a page took longer than {PAGE_TIMEOUT_SECONDS} s", code="ocr_failed") from exc
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["unknown error"]
        raise ParseError(f"OCR failed: {reason[0][:300]}", code="ocr_failed")
    return done.stdout.decode("utf-8", errors="replace")


def _paragraphs(text: str) -> str:
    """Tesseract's lines → paragraphs (a blank line between them), hyphenated line ends joined."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in text.replace("\f", "\n").splitlines():
        line = line.strip()
        if not line:
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        if current and current[-1].endswith("-") and line[:1].islower():
            current[-1] = current[-1][:-1] + line
        else:
            current.append(line)
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def ocr_pdf(data: bytes, *, languages: str = "rus+eng", max_pages: int = 50) -> ParsedDocument:
    """The text of a scanned PDF, a ``## Page N`` section per page when it has several."""
    try:
        pdf = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        raise ParseError(f"the PDF is corrupt ({exc})", code="corrupt") from exc
    try:
        count = len(pdf)
        if count > max_pages:
            raise NeedsOcr(f"the scan has {count} pages, more than the {max_pages} OCR reads: it needs OCR elsewhere")
        pages = []
        for index in range(count):
            page = pdf[index]
            try:
                pages.append(_paragraphs(_tesseract(_page_png(page), languages)))
            finally:
                page.close()
    finally:
        pdf.close()
    if not any(pages):
        raise ParseError("no text found in the PDF, not even by OCR", code="empty_document")
    first = next((p.split("\n", 1)[0] for p in pages if p), "")
    title = first if len(first) <= 120 else ""
    if len(pages) == 1:
        return ParsedDocument(title=title, text=pages[0], format="pdf")
    parts = [f"{heading_line(2, f'Page {n}')}\n\n{text}" for n, text in enumerate(pages, start=1) if text]
    return ParsedDocument(title=title, text="\n\n".join(parts), format="pdf")
