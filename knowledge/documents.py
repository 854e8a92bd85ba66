"""Reading source files into document drafts (KS-2). Pure: no ORM, no users table.

Front matter (YAML between ``---`` lines) may carry ``title``, ``url``, ``acl`` (list or one
principal), ``acl_also`` (a list of such lists, each one more «all of» clause), ``author``, ``source_system``, ``external_id``, ``never_hint``, ``user_writable`` and ``links`` (external ids of records of
the same source system, or ``{to: ..., type: ...}`` mappings). Principals written as
``user:<username>`` are resolved to ``user:<id>`` later, by the ingest service.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import yaml

SUPPORTED_SUFFIXES = {".md", ".markdown", ".txt", ".text", ".html", ".htm"}
_PRINCIPAL = re.compile(r"^(everyone|public|user:[\w.@+-]+|group:[^\s\x1f]{1,150})$")


class DocumentError(ValueError):
    """A file that cannot become a record (malformed front matter, empty text, bad ACL)."""


@dataclass(frozen=True)
class LinkDraft:
    to_external_id: str
    link_type: str = "relates"


@dataclass(frozen=True)
class DocumentDraft:
    """A parsed source document, before principals are resolved and chunks are made."""

    external_id: str
    title: str
    text: str
    url: str = ""
    acl: tuple[str, ...] = ()
    acl_also: tuple[tuple[str, ...], ...] = ()
    author: str | None = None
    source_system: str = "files"
    links: tuple[LinkDraft, ...] = field(default_factory=tuple)
    never_hint: bool = False
    user_writable: bool = False  # an admin's folder is curated unless its front matter says otherwise


def validate_principal(value: str) -> str:
    value = str(value).strip()
    if not _PRINCIPAL.match(value):
        raise DocumentError(f"«{value}» is not a principal (user:<id|username>, group:<name>, everyone, public)")
    return value


def _as_list(value, name: str) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in re.split(r"[,\s]+", value) if part]
    if isinstance(value, list | tuple):
        return list(value)
    raise DocumentError(f"front matter «{name}» must be a list or a string")


class _HtmlText(HTMLParser):
    """HTML → Markdown-ish text: headings become ``#`` lines, blocks become paragraphs."""

    BLOCKS = {"p", "div", "li", "br", "tr", "section", "article", "pre", "blockquote", "table", "ul", "ol"}
    SKIP = {"script", "style", "head"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self._in_title = True
        elif tag in self.SKIP:
            self._skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.parts.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        elif tag in self.SKIP:
            self._skip = max(0, self._skip - 1)
        elif re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(re.sub(r"\s+", " ", data))


def html_to_text(source: str) -> tuple[str, str]:
    """(title, text) of an HTML document."""
    parser = _HtmlText()
    parser.feed(source)
    parser.close()
    lines = [line.strip() for line in "".join(parser.parts).splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return html.unescape(parser.title.strip()), text


def _first_heading(text: str) -> str:
    """The first ``# heading``, else a short first line (plain text files), else ""."""
    for line in text.splitlines():
        match = re.match(r"^#\s+(.+?)\s*#*$", line)
        if match:
            return match.group(1).strip()
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    return first if len(first) <= 120 else ""


_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)


def split_front_matter(raw: str) -> tuple[dict, str]:
    """(metadata, body); a file without front matter has ``{}``. Malformed YAML → DocumentError."""
    match = _FRONT_MATTER.match(raw)
    if not match:
        return {}, raw
    try:
        meta = yaml.safe_load(match.group(1)) if match.group(1).strip() else {}
    except yaml.YAMLError as exc:
        raise DocumentError(f"malformed front matter: {str(exc).splitlines()[0]}") from exc
    if not isinstance(meta, dict):
        raise DocumentError("malformed front matter: it must be a mapping of fields")
    return meta, raw[match.end() :]


def _clauses(value) -> tuple[tuple[str, ...], ...]:
    """Front matter ``acl_also``: a list of clauses, each a list of principals (or one principal, or
    a comma-separated string); a reader must match ``acl`` and one principal of every clause."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DocumentError("front matter «acl_also» must be a list of lists of principals")
    clauses = []
    for item in value:
        if isinstance(item, dict) or item is None:
            raise DocumentError("front matter «acl_also» items must be lists of principals")
        clause = tuple(
            sorted({validate_principal(p) for p in (_as_list(item, "acl_also") if isinstance(item, str) else item)})
        )
        if not clause:
            raise DocumentError("empty acl_also clause: nobody could read it")
        clauses.append(clause)
    return tuple(clauses)


def parse_document(
    raw: str, *, external_id: str, suffix: str = ".md", default_acl: tuple[str, ...] = ()
) -> DocumentDraft:
    """Parse one file's content; raises ``DocumentError`` with a human reason."""
    meta, body = split_front_matter(raw)
    html_title = ""
    if suffix.lower() in {".html", ".htm"}:
        html_title, body = html_to_text(body)
    body = body.strip()
    if not body:
        raise DocumentError("empty document")
    title = str(meta.get("title") or html_title or _first_heading(body) or Path(external_id).stem).strip()[:500]
    acl_values = _as_list(meta.get("acl"), "acl") if "acl" in meta else list(default_acl)
    acl = tuple(sorted({validate_principal(value) for value in acl_values}))
    if not acl:
        raise DocumentError("empty acl: nobody could read it (give `acl:` in front matter or --default-acl)")
    acl_also = _clauses(meta.get("acl_also"))
    author = meta.get("author")
    author = validate_principal(author) if author not in (None, "") else None
    links = []
    for item in _as_list(meta.get("links"), "links"):
        if isinstance(item, dict) and item.get("to"):
            links.append(LinkDraft(str(item["to"]), str(item.get("type") or "relates")))
        elif isinstance(item, str | int):
            links.append(LinkDraft(str(item)))
        else:
            raise DocumentError("front matter «links» items must be external ids or {to, type}")
    source_system = str(meta.get("source_system") or "files").strip()
    external = str(meta.get("external_id") or external_id).strip()
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,63}", source_system):
        raise DocumentError(f"source_system «{source_system}» must be a lowercase identifier")
    never_hint = meta.get("never_hint", False)
    if not isinstance(never_hint, bool):
        raise DocumentError("front matter «never_hint» must be true or false")
    user_writable = meta.get("user_writable", False)
    if not isinstance(user_writable, bool):
        raise DocumentError("front matter «user_writable» must be true or false")
    return DocumentDraft(
        external_id=external[:512],
        title=title,
        text=body,
        url=str(meta.get("url") or "")[:2000],
        acl=acl,
        acl_also=acl_also,
        author=author,
        source_system=source_system,
        links=tuple(links),
        never_hint=never_hint,
        user_writable=user_writable,
    )
