"""Confluence storage format (XHTML with ``ac:``/``ri:`` macros) → Markdown for indexing (pure).

The storage format is not well-formed XML (no root, no namespace declarations, HTML entities such
as ``&nbsp;``), so it is read with BeautifulSoup's ``html.parser``, which keeps ``ac:structured-macro``
as a tag name and CDATA bodies as text. No library converts it well for search (research:
CONFLUENCE.md § 3), hence this converter: code, info/note/warning/tip/panel/expand, status,
the Jira issue macro, ``ac:link`` to pages/attachments/users, images, task lists, HTML tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bs4 import BeautifulSoup, CData, Comment, NavigableString, Tag

from knowledge.parsers.base import markdown_table

# Panel-like macros and the label their content is shown under.
_PANELS = {"info": "Info", "note": "Note", "warning": "Warning", "tip": "Tip", "panel": "", "expand": ""}
# Macros with no text worth indexing.
_SILENT = {"toc", "children", "pagetree", "recently-updated", "livesearch", "anchor", "contentbylabel"}
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = {"p", "div", "blockquote", "pre", "ul", "ol", "table", "hr", *_HEADINGS}


@dataclass
class StorageLinks:
    """What a page's body points at: other pages (by space key and title), attachments, users."""

    pages: list[tuple[str, str]] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Converted:
    """A page body as Markdown, and what it links to."""

    markdown: str
    links: StorageLinks


UserName = Callable[[str], str]


def storage_to_markdown(storage: str, *, space_key: str = "", user_name: UserName | None = None) -> Converted:
    """``storage`` (a page's ``body.storage.value``) → Markdown; ``user_name`` maps a user key to a display name."""
    soup = BeautifulSoup(storage or "", "html.parser")
    conv = _Converter(space_key=space_key, user_name=user_name or (lambda key: key))
    text = conv.blocks(soup)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return Converted(markdown=text, links=conv.links)


def _param(tag: Tag, name: str) -> str:
    for child in tag.find_all("ac:parameter", recursive=False):
        if child.get("ac:name") == name:
            return child.get_text().strip()
    return ""


class _Converter:
    def __init__(self, *, space_key: str, user_name: UserName):
        self.space_key = space_key
        self.user_name = user_name
        self.links = StorageLinks()

    # Blocks: each child becomes zero or more paragraphs separated by blank lines.
    def blocks(self, node: Tag) -> str:
        out: list[str] = []
        inline: list[str] = []

        def flush() -> None:
            text = re.sub(r"[ \t\u00a0]+", " ", "".join(inline)).strip()
            if text:
                out.append(text)
            inline.clear()

        for child in node.children:
            if isinstance(child, Tag) and self._is_block(child):
                flush()
                block = self.block(child)
                if block.strip():
                    out.append(block.strip("\n"))
            else:
                inline.append(self.inline(child))
        flush()
        return "\n\n".join(out)

    def _is_block(self, tag: Tag) -> bool:
        if tag.name in _BLOCKS or tag.name in ("ac:task-list", "ac:layout", "ac:layout-section", "ac:layout-cell"):
            return True
        if tag.name == "ac:structured-macro":
            return tag.get("ac:name") not in ("status", "jira", "anchor")
        return False

    def block(self, tag: Tag) -> str:
        name = tag.name
        if name in _HEADINGS:
            return "#" * _HEADINGS[name] + " " + self.inline_text(tag)
        if name == "hr":
            return "---"
        if name in ("ul", "ol"):
            return self.list_(tag, depth=0)
        if name == "table":
            return self.table(tag)
        if name == "pre":
            return "```\n" + tag.get_text().strip("\n") + "\n```"
        if name == "blockquote":
            return "\n".join("> " + line if line else ">" for line in self.blocks(tag).splitlines())
        if name == "ac:structured-macro":
            return self.macro(tag)
        if name == "ac:task-list":
            return self.tasks(tag)
        return self.blocks(tag)

    def macro(self, tag: Tag) -> str:
        kind = str(tag.get("ac:name", ""))
        if kind in ("code", "noformat"):
            body = tag.find("ac:plain-text-body")
            language = _param(tag, "language")
            code = body.get_text() if body else ""
            title = _param(tag, "title")
            fence = "```" + language + "\n" + code.strip("\n") + "\n```"
            return (f"**{title}**\n\n" if title else "") + fence
        if kind in _SILENT:
            return ""
        body = tag.find("ac:rich-text-body")
        inner = self.blocks(body) if body else ""
        if kind in _PANELS:
            title = _param(tag, "title")
            label = ": ".join(p for p in (_PANELS[kind], title) if p)
            lines = ([f"**{label}**", ""] if label else []) + inner.splitlines()
            return "\n".join("> " + line if line else ">" for line in lines)
        # An unknown macro: keep its body's text, drop the wrapper.
        if inner:
            return inner
        plain = tag.find("ac:plain-text-body")
        return plain.get_text().strip() if plain else ""

    def tasks(self, tag: Tag) -> str:
        lines = []
        for task in tag.find_all("ac:task", recursive=False):
            status = task.find("ac:task-status")
            done = status is not None and status.get_text().strip() == "complete"
            body = task.find("ac:task-body")
            text = self.inline_text(body) if body else ""
            lines.append(f"- [{'x' if done else ' '}] {text}")
        return "\n".join(lines)

    def list_(self, tag: Tag, *, depth: int) -> str:
        lines = []
        ordered = tag.name == "ol"
        for n, item in enumerate(tag.find_all("li", recursive=False), start=1):
            marker = f"{n}." if ordered else "-"
            parts: list[str] = []
            nested: list[str] = []
            for child in item.children:
                if isinstance(child, Tag) and child.name in ("ul", "ol"):
                    nested.append(self.list_(child, depth=depth + 1))
                elif isinstance(child, Tag) and child.name == "p":
                    parts.append(self.inline_text(child))
                else:
                    parts.append(self.inline(child))
            text = re.sub(r"\s+", " ", " ".join(p for p in parts if p.strip())).strip()
            lines.append("  " * depth + f"{marker} {text}")
            lines.extend(nested)
        return "\n".join(lines)

    def table(self, tag: Tag) -> str:
        rows = []
        for tr in tag.find_all("tr"):
            if tr.find_parent("table") is not tag:
                continue
            rows.append([self.inline_text(cell) for cell in tr.find_all(["th", "td"], recursive=False)])
        return markdown_table(rows)

    # Inline content: text with emphasis, links and inline macros, on one line.
    def inline_text(self, node: Tag) -> str:
        parts = []
        for child in node.children:
            if isinstance(child, Tag) and self._is_block(child):
                parts.append(" " + self.blocks(child).replace("\n", " ") + " ")
            else:
                parts.append(self.inline(child))
        return re.sub(r"[\s\u00a0]+", " ", "".join(parts)).strip()

    def inline(self, node: object) -> str:
        if isinstance(node, Comment):
            return ""
        if isinstance(node, CData | NavigableString):
            return str(node)
        if not isinstance(node, Tag):
            return ""
        name = node.name
        if name == "br":
            return " "
        if name in ("strong", "b"):
            return self._wrap(node, "**")
        if name in ("em", "i"):
            return self._wrap(node, "*")
        if name in ("s", "del"):
            return self._wrap(node, "~~")
        if name == "code":
            return "`" + node.get_text() + "`"
        if name == "a":
            text = self.inline_text(node)
            href = node.get("href", "")
            return f"[{text}]({href})" if href and text else text
        if name == "ac:link":
            return self.link(node)
        if name == "ac:image":
            return self.image(node)
        if name == "ac:emoticon":
            return ""
        if name == "ri:user":
            return "@" + self.user(node)
        if name == "ac:structured-macro":
            kind = node.get("ac:name")
            if kind == "status":
                return f"[{_param(node, 'title') or _param(node, 'colour')}]"
            if kind == "jira":
                key = _param(node, "key")
                return key or _param(node, "jqlQuery")
            if kind == "anchor":
                return ""
            return self.blocks(node)
        if name in ("ac:parameter", "ac:placeholder"):
            return ""
        return "".join(self.inline(child) for child in node.children)

    def _wrap(self, node: Tag, mark: str) -> str:
        text = self.inline_text(node)
        return f"{mark}{text}{mark}" if text else ""

    def user(self, tag: Tag) -> str:
        key = str(tag.get("ri:userkey") or tag.get("ri:username") or "")
        if key:
            self.links.users.append(key)
        return self.user_name(key) if key else ""

    def link(self, tag: Tag) -> str:
        body = tag.find(["ac:plain-text-link-body", "ac:link-body"])
        label = body.get_text().strip() if body else ""
        page = tag.find("ri:page")
        if page is not None:
            title = str(page.get("ri:content-title", ""))
            space = str(page.get("ri:space-key") or self.space_key)
            if title:
                self.links.pages.append((space, title))
            return label or title
        attachment = tag.find("ri:attachment")
        if attachment is not None:
            filename = str(attachment.get("ri:filename", ""))
            if filename:
                self.links.attachments.append(filename)
            return label or filename
        user = tag.find("ri:user")
        if user is not None:
            name = self.user(user)
            return label or ("@" + name if name else "")
        url = tag.find("ri:url")
        if url is not None:
            href = str(url.get("ri:value", ""))
            return f"[{label or href}]({href})"
        anchor = tag.get("ac:anchor")
        return label or (str(anchor) if anchor else "")

    def image(self, tag: Tag) -> str:
        alt = str(tag.get("ac:alt") or tag.get("ac:title") or "")
        attachment = tag.find("ri:attachment")
        if attachment is not None:
            filename = str(attachment.get("ri:filename", ""))
            if filename:
                self.links.attachments.append(filename)
            return f"![{alt or filename}]({filename})"
        url = tag.find("ri:url")
        if url is not None:
            return f"![{alt}]({url.get('ri:value', '')})"
        return ""
