"""E-mail (``.eml``, RFC 822 / MIME, the standard library's parser) → Markdown: the headers that
say who wrote to whom and when, the body (plain text, else HTML), and each attachment the other
parsers read as a section of its own. An attachment that cannot be read is named with its reason;
it never fails the message."""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Callable

from knowledge.documents import html_to_text
from knowledge.parsers.base import NeedsOcr, ParsedDocument, ParseError, heading_line

_HEADING = re.compile(r"^(#{1,6})(\s)", re.M)


def _demote(text: str, levels: int) -> str:
    """An attachment's headings sit under its own ``## Attachment`` heading."""
    return _HEADING.sub(lambda m: "#" * min(6, len(m.group(1)) + levels) + m.group(2), text)


def parse_eml(data: bytes, *, parse_attachment: Callable[[bytes, str], ParsedDocument]) -> ParsedDocument:
    message = email.message_from_bytes(data, policy=email.policy.default)
    if not message.keys():
        raise ParseError("the file is not an e-mail message (no headers)", code="corrupt")
    subject = str(message.get("Subject") or "").strip()
    parts: list[str] = []
    header_lines = [f"{name}: {message[name]}" for name in ("From", "To", "Cc", "Date") if message.get(name)]
    if header_lines:
        parts.append("\n".join(header_lines))
    body = message.get_body(preferencelist=("plain", "html"))
    if body is not None:
        content = body.get_content()
        text = html_to_text(content)[1] if body.get_content_subtype() == "html" else content
        if text.strip():
            parts.append(text.strip())
    for attachment in message.iter_attachments():
        name = attachment.get_filename() or "attachment"
        payload = attachment.get_payload(decode=True)
        payload = payload if isinstance(payload, bytes) else b""
        try:
            parsed = parse_attachment(payload, name)
        except NeedsOcr:
            parts.append(f"{heading_line(2, f'Attachment: {name}')}\n\n(a scan without a text layer: not read)")
            continue
        except ParseError as exc:
            parts.append(f"{heading_line(2, f'Attachment: {name}')}\n\n(could not be read: {exc})")
            continue
        parts.append(f"{heading_line(2, f'Attachment: {name}')}\n\n{_demote(parsed.text, 2)}")
    return ParsedDocument(title=subject, text="\n\n".join(parts), format="eml")
