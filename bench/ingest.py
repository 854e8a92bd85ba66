"""bench/ingest: how fast uploaded documents become Markdown, ours beside markitdown (issue 23).

**Parse throughput** (this half): the same generated files of every upload format, parsed by
``knowledge.parsers.parse_file`` (ours: pdfplumber + pypdfium2, python-docx, python-pptx, openpyxl,
charset-normalizer, the mail parser) and by ``markitdown`` 0.1.9 (MIT; bench-only, from
``bench/requirements.txt``), interleaved round by round in one process, single-threaded. Figures
per format: MB/s of input and, where the format has pages (PDF pages, PPTX slides, XLSX rows/1000),
units/s. Each side's output is checked to hold the file's marker words, so a fast empty parse
cannot win. OCR is not timed here (Tesseract's speed, the same for any wrapper).

**Confluence sync**: a full sync of ``BENCH_CONFLUENCE_PAGES`` (10 000) emulated pages end to end
(fetch, storage → Markdown, chunk, embed with the default embedder, index into PostgreSQL) in pages
per second, against the obvious pipeline on the same emulator (``bench/_confluence.py``).

    python -m bench ingest
    BENCH_INGEST_SCALE=4 BENCH_INGEST_ROUNDS=5 python -m bench ingest   # bigger files, more rounds
    BENCH_INGEST_PARSE=0 BENCH_CONFLUENCE_PAGES=2000 python -m bench ingest   # the sync half only

The last line is ``RESULT {json}``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage

SCALE = int(os.environ.get("BENCH_INGEST_SCALE", "1"))
ROUNDS = int(os.environ.get("BENCH_INGEST_ROUNDS", "3"))
MARKER = "Zanzibar"  # in every generated file; both sides' output must contain it


@dataclass(frozen=True)
class BenchFile:
    fmt: str
    filename: str
    data: bytes
    units: int  # pages / slides / thousand rows; 0 when the format has none
    unit_name: str = ""


def _sentence(i: int) -> str:
    return f"Section {i} explains the travel policy of {MARKER} office number {i} in plain words."


def _pdf(pages: int) -> BenchFile:
    from tests.knowledge.files import PdfText, grid, pdf_bytes

    content, grids = [], []
    for page in range(pages):
        lines = [PdfText(72, 740, f"Chapter {page + 1}", size=18)]
        lines += [PdfText(72, 710 - 14 * i, _sentence(page * 30 + i)) for i in range(25)]
        # a 3 x 4 ruled table at the bottom
        top = 330
        for row in range(4):
            for col in range(3):
                lines.append(PdfText(80 + sum((150, 120, 120)[:col]), top - 20 * row - 14, f"r{row}c{col} {MARKER}"))
        grids.append(grid(72, top, (150, 120, 120), 4))
        content.append(lines)
    return BenchFile("pdf", "bench.pdf", pdf_bytes(content, grids=grids), pages, "pages")


def _docx(paragraphs: int) -> BenchFile:
    import docx

    document = docx.Document()
    for i in range(paragraphs):
        if i % 20 == 0:
            document.add_heading(f"Part {i // 20 + 1}", 1)
        document.add_paragraph(_sentence(i))
        if i % 50 == 49:
            table = document.add_table(rows=5, cols=3)
            for r in range(5):
                for c in range(3):
                    table.cell(r, c).text = f"{MARKER} {r}.{c}"
    out = io.BytesIO()
    document.save(out)
    return BenchFile("docx", "bench.docx", out.getvalue(), 0)


def _pptx(slides: int) -> BenchFile:
    import pptx

    presentation = pptx.Presentation()
    for i in range(slides):
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = f"Slide about {MARKER} {i}"
        slide.placeholders[1].text = "\n".join(_sentence(i * 5 + k) for k in range(5))
        slide.notes_slide.notes_text_frame.text = f"Speaker notes {i}"
    out = io.BytesIO()
    presentation.save(out)
    return BenchFile("pptx", "bench.pptx", out.getvalue(), slides, "slides")


def _xlsx(rows: int) -> BenchFile:
    import openpyxl

    workbook = openpyxl.Workbook()
    for sheet_index in range(2):
        sheet = workbook.active if sheet_index == 0 else workbook.create_sheet()
        sheet.title = f"Sheet {sheet_index + 1}"
        sheet.append(["id", "city", "amount", "note"])
        for i in range(rows // 2):
            sheet.append([i, f"{MARKER} {i % 40}", i * 3.5, f"row {i}"])
    out = io.BytesIO()
    workbook.save(out)
    return BenchFile("xlsx", "bench.xlsx", out.getvalue(), max(1, rows // 1000), "k rows")


def _csv(rows: int) -> BenchFile:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "city", "amount"])
    for i in range(rows):
        writer.writerow([i, f"{MARKER} {i % 40}", i * 3])
    return BenchFile("csv", "bench.csv", out.getvalue().encode(), max(1, rows // 1000), "k rows")


def _html(paragraphs: int) -> BenchFile:
    body = "".join(
        (f"<h2>Part {i // 20}</h2>" if i % 20 == 0 else "") + f"<p>{_sentence(i)}</p>" for i in range(paragraphs)
    )
    table = "<table><tr><th>a</th><th>b</th></tr>" + "<tr><td>1</td><td>2</td></tr>" * 50 + "</table>"
    return BenchFile(
        "html", "bench.html", f"<html><head><title>{MARKER}</title></head><body>{body}{table}</body></html>".encode(), 0
    )


def _markdown(paragraphs: int) -> BenchFile:
    text = "\n\n".join((f"## Part {i // 20}\n\n" if i % 20 == 0 else "") + _sentence(i) for i in range(paragraphs))
    return BenchFile("markdown", "bench.md", f"# {MARKER}\n\n{text}\n".encode(), 0)


def _text_cp1251(paragraphs: int) -> BenchFile:
    text = "\n\n".join(f"Раздел {i}: порядок командировок офиса {MARKER} номер {i}." for i in range(paragraphs))
    return BenchFile("text", "bench.txt", text.encode("cp1251"), 0)


def _eml(paragraphs: int) -> BenchFile:
    message = EmailMessage()
    message["Subject"], message["From"], message["To"] = f"Report {MARKER}", "a@example.com", "b@example.com"
    message.set_content("\n\n".join(_sentence(i) for i in range(paragraphs)))
    message.add_attachment(
        "\n".join(f"{i},{MARKER}" for i in range(200)).encode(), maintype="text", subtype="csv", filename="a.csv"
    )
    return BenchFile("eml", "bench.eml", message.as_bytes(), 0)


def files() -> list[BenchFile]:
    return [
        _pdf(20 * SCALE),
        _docx(400 * SCALE),
        _pptx(30 * SCALE),
        _xlsx(4000 * SCALE),
        _csv(4000 * SCALE),
        _html(600 * SCALE),
        _markdown(600 * SCALE),
        _text_cp1251(600 * SCALE),
        _eml(300 * SCALE),
    ]


def _ours() -> Callable[[BenchFile], str]:
    from knowledge.parsers import parse_file

    return lambda f: parse_file(f.data, filename=f.filename, max_bytes=200 * 2**20).text


def _markitdown() -> Callable[[BenchFile], str]:
    from markitdown import MarkItDown, StreamInfo

    converter = MarkItDown(enable_plugins=False)
    extension = {"markdown": ".md", "text": ".txt"}

    def convert(f: BenchFile) -> str:
        info = StreamInfo(extension=extension.get(f.fmt, "." + f.fmt), filename=f.filename)
        return converter.convert_stream(io.BytesIO(f.data), stream_info=info).text_content

    return convert


def _time(parse: Callable[[BenchFile], str], f: BenchFile) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        text = parse(f)
    except Exception as exc:  # a peer that cannot read a format: reported, not fatal
        return float("nan"), f"error: {exc.__class__.__name__}: {exc}"[:200]
    return time.perf_counter() - started, text


def parse_throughput() -> dict:
    sides = {"ours": _ours(), "markitdown": _markitdown()}
    corpus = files()
    timings: dict[str, dict[str, list[float]]] = {side: {f.fmt: [] for f in corpus} for side in sides}
    notes: dict[str, dict[str, str]] = {side: {} for side in sides}
    for round_ in range(ROUNDS + 1):  # round 0 warms imports and caches, not counted
        order = list(sides) if round_ % 2 else list(reversed(sides))
        for f in corpus:
            for side in order:
                seconds, text = _time(sides[side], f)
                if text.startswith("error:") or MARKER not in text:
                    notes[side][f.fmt] = text[:200] if text.startswith("error:") else "output lacks the file's words"
                if round_:
                    timings[side][f.fmt].append(seconds)
    result: dict = {"formats": {}}
    header = (
        f"{'format':<9}{'size':>9}  {'ours MB/s':>10}{'units/s':>10}  {'markitdown MB/s':>16}{'units/s':>10}  ratio"
    )
    print(header)
    for f in corpus:
        row: dict = {"bytes": len(f.data), "units": f.units, "unit": f.unit_name}
        cells = []
        for side in sides:
            median = statistics.median(timings[side][f.fmt])
            mb_s = len(f.data) / 2**20 / median if median == median and median > 0 else None
            units_s = f.units / median if f.units and mb_s else None
            row[side] = {
                "seconds": round(median, 4) if median == median else None,
                "mb_per_s": round(mb_s, 4) if mb_s else None,
                "units_per_s": round(units_s, 1) if units_s else None,
                "note": notes[side].get(f.fmt, ""),
            }
            cells.append((mb_s, units_s))
        ratio = cells[0][0] / cells[1][0] if cells[0][0] and cells[1][0] else None
        row["ours_vs_markitdown"] = round(ratio, 2) if ratio else None
        result["formats"][f.fmt] = row

        def show(value, width):
            return f"{value:>{width}.3g}" if value else f"{'—':>{width}}"

        print(
            f"{f.fmt:<9}{len(f.data) / 1024:>7.0f}kB  {show(cells[0][0], 10)}{show(cells[0][1], 10)}  "
            f"{show(cells[1][0], 16)}{show(cells[1][1], 10)}  {show(ratio, 5)}"
            + "".join(f"  [{side}: {notes[side][f.fmt]}]" for side in sides if f.fmt in notes[side])
        )
    return result


def confluence_sync() -> dict | None:
    """The full Confluence sync (``BENCH_CONFLUENCE_PAGES``, default 10 000 emulated pages, end to
    end) against the obvious pipeline: ``bench/_confluence.py``. ``BENCH_CONFLUENCE_PAGES=0`` skips it."""
    if int(os.environ.get("BENCH_CONFLUENCE_PAGES", "10000")) <= 0:
        return None
    from bench._confluence import confluence_sync as run

    return run()


def main() -> None:
    result: dict = {"bench": "ingest", "rounds": ROUNDS, "scale": SCALE}
    if os.environ.get("BENCH_INGEST_PARSE", "1") != "0":
        result["parse"] = parse_throughput()
    sync = confluence_sync()
    if sync is not None:
        result["confluence_sync"] = sync
    print("RESULT " + json.dumps(result, ensure_ascii=False), flush=True)
