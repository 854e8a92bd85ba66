"""Plain text, CSV, Markdown and HTML uploads: bytes decoded with the charset detected, then the
store's own Markdown / HTML reading (``knowledge.documents``)."""

from __future__ import annotations

import csv
import io

from charset_normalizer import from_bytes

from knowledge.documents import html_to_text, split_front_matter
from knowledge.parsers.base import ParsedDocument, ParseError, markdown_table

# Russian offices write text files in these besides UTF-8; detection chooses among them only (a
# free guess over every code page mistakes short Cyrillic text for Greek or Turkish ones).
CANDIDATE_ENCODINGS = ["cp1251", "koi8_r", "cp866", "mac_cyrillic", "cp1252", "utf_16"]


def decode(data: bytes) -> str:
    """UTF-8 (with or without BOM) if it decodes, else the best of CANDIDATE_ENCODINGS."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    best = from_bytes(data, cp_isolation=CANDIDATE_ENCODINGS).best()
    if best is None:
        raise ParseError(
            "the text's encoding could not be recognised (expected UTF-8, cp1251 or KOI8-R)", code="corrupt"
        )
    return str(best)


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise ParseError("the file is binary, not text", code="corrupt")
    return text


def parse_text(data: bytes) -> ParsedDocument:
    text = _no_nul(decode(data)).replace("\r\n", "\n")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return ParsedDocument(title=first if len(first) <= 120 else "", text=text, format="text")


def parse_markdown(data: bytes) -> ParsedDocument:
    # Front matter is the folder ingest's (an admin's); an upload's ACL is chosen at upload, so
    # only its title is taken.
    meta, body = split_front_matter(_no_nul(decode(data)))
    title = str(meta.get("title") or "")
    if not title:
        title = next((line[2:].strip() for line in body.splitlines() if line.startswith("# ")), "")
    return ParsedDocument(title=title, text=body, format="markdown")


def parse_html(data: bytes) -> ParsedDocument:
    title, text = html_to_text(_no_nul(decode(data)))
    return ParsedDocument(title=title, text=text, format="html")


def parse_csv(data: bytes) -> ParsedDocument:
    text = _no_nul(decode(data))
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    return ParsedDocument(title="", text=markdown_table(rows), format="csv")
