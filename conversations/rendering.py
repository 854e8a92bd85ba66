"""Answers as Markdown, rendered and sanitised on the server.

A model's output (and the documents it quotes) is untrusted: nothing in it may run script, load a
remote resource or point a link at ``javascript:`` in the platform's origin. markdown-it-py renders
CommonMark plus tables with raw HTML off (a ``<script>`` in the text comes out as text), images
become plain links (nothing loads by itself), and nh3 (ammonia) then keeps only the tags and
attributes below, with http/https/mailto links. ``[N]`` citation markers outside code become links
to the answer's source cards (``#src-<message>-<N>``), added after sanitising, digits only.
"""

from __future__ import annotations

import html
import re

import nh3
from markdown_it import MarkdownIt

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "strong",
    "em",
    "s",
    "del",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}
_MARKER = re.compile(r"\[(\d{1,3})\]")
_TAG = re.compile(r"(<[^>]*>)")
_CODE_CLASS = re.compile(r"^language-[A-Za-z0-9_+-]{1,32}$")


def _image_as_link(self, tokens, idx, options, env):
    """An image is shown as a link to it: a remote image would load (and report) by itself."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    src = html.escape(token.attrGet("src") or "", quote=True)
    return f'<a href="{src}">[изображение{": " + html.escape(alt) if alt else ""}]</a>'


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
    md.enable("strikethrough")
    md.add_render_rule("image", _image_as_link)
    return md


_MD = _parser()


def _code_class(tag: str, name: str, value: str) -> str | None:
    if tag == "code" and name == "class":
        return value if _CODE_CLASS.match(value) else None
    return value


def _link_markers(safe_html: str, message_id: int | str | None, markers: set[int] | None) -> str:
    """``[N]`` in text (not in code) → a link to source card N; other brackets stay text."""
    out, in_code = [], 0
    for part in _TAG.split(safe_html):
        if part.startswith("<"):
            lowered = part.lower()
            if lowered.startswith(("<code", "<pre")):
                in_code += 1
            elif lowered.startswith(("</code", "</pre")):
                in_code = max(0, in_code - 1)
            out.append(part)
        elif in_code:
            out.append(part)
        else:

            def link(match: re.Match) -> str:
                n = int(match.group(1))
                if markers is not None and n not in markers:
                    return match.group(0)
                anchor = f"src-{message_id}-{n}" if message_id is not None else f"src-{n}"
                return f'<a class="cite" href="#{anchor}" data-cite="{n}">[{n}]</a>'

            out.append(_MARKER.sub(link, part))
    return "".join(out)


def markdown_render(text: str, *, message_id: int | str | None = None, markers: set[int] | None = None) -> str:
    """Safe HTML for an answer's Markdown; ``markers`` limits which ``[N]`` become source links."""
    rendered = _MD.render(text or "")
    clean = nh3.clean(
        rendered,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        attribute_filter=_code_class,
        strip_comments=True,
    )
    return _link_markers(clean, message_id, markers)
