"""Parsing source files: front matter, HTML, per-file errors (KS-2)."""

import pytest

from knowledge.documents import DocumentError, html_to_text, parse_document


def test_front_matter_fields_are_read():
    raw = (
        "---\ntitle: Отпуск\nurl: https://wiki/x\nacl: [everyone, group:hr]\nauthor: user:admin\n"
        "links: [b.md, {to: c.md, type: blocks}]\n---\n# Заголовок\n\nТекст."
    )
    draft = parse_document(raw, external_id="hr/otpusk.md")
    assert draft.title == "Отпуск"
    assert draft.url == "https://wiki/x"
    assert draft.acl == ("everyone", "group:hr")
    assert draft.author == "user:admin"
    assert draft.source_system == "files" and draft.external_id == "hr/otpusk.md"
    assert [(link.to_external_id, link.link_type) for link in draft.links] == [("b.md", "relates"), ("c.md", "blocks")]


def test_source_system_and_external_id_may_be_overridden():
    raw = "---\nacl: everyone\nsource_system: confluence\nexternal_id: PAGE-42\n---\nТекст."
    draft = parse_document(raw, external_id="x.md")
    assert (draft.source_system, draft.external_id) == ("confluence", "PAGE-42")


def test_acl_also_clauses_are_read_from_front_matter():
    raw = "---\nacl: [everyone]\nacl_also: [[group:hr, user:ivan], group:dev]\n---\nТекст."
    assert parse_document(raw, external_id="x").acl_also == (("group:hr", "user:ivan"), ("group:dev",))
    assert parse_document("---\nacl: everyone\n---\nТекст.", external_id="x").acl_also == ()


@pytest.mark.parametrize("value", ["group:hr", "[[]]", "[{a: 1}]", "[[root]]", "[null]"])
def test_bad_acl_also_in_front_matter_is_refused(value):
    with pytest.raises(DocumentError):
        parse_document(f"---\nacl: everyone\nacl_also: {value}\n---\nТекст.", external_id="x")


def test_acl_as_a_comma_separated_string():
    assert parse_document("---\nacl: group:it, everyone\n---\nТекст", external_id="x").acl == ("everyone", "group:it")


def test_default_acl_applies_without_front_matter():
    draft = parse_document(
        "Просто текст\n\nи ещё абзац", external_id="notes/a.txt", suffix=".txt", default_acl=("everyone",)
    )
    assert draft.acl == ("everyone",)
    assert draft.title == "Просто текст"


def test_missing_acl_without_default_is_refused():
    with pytest.raises(DocumentError, match="empty acl"):
        parse_document("Текст", external_id="a.md")


@pytest.mark.parametrize("raw", ["---\ntitle: [unclosed\n---\nТекст", "---\n- just\n- a list\n---\nТекст"])
def test_malformed_front_matter_is_a_document_error(raw):
    with pytest.raises(DocumentError, match="malformed front matter"):
        parse_document(raw, external_id="a.md", default_acl=("everyone",))


def test_empty_document_is_refused():
    with pytest.raises(DocumentError, match="empty document"):
        parse_document("---\ntitle: Пусто\nacl: [everyone]\n---\n   \n", external_id="a.md")


@pytest.mark.parametrize("principal", ["root", "user:", "group:", "user:a b", "ever yone"])
def test_invalid_principals_are_refused(principal):
    with pytest.raises(DocumentError, match="not a principal"):
        parse_document(f"---\nacl: ['{principal}']\n---\nТекст", external_id="a.md")


def test_html_becomes_markdown_like_text():
    title, text = html_to_text(
        "<html><head><title>Офис</title><style>p{}</style></head><body>"
        "<h1>Офис</h1><p>Адрес &amp; часы</p><script>x()</script><h2>Парковка</h2><p>20 мест</p></body></html>"
    )
    assert title == "Офис"
    assert "# Офис" in text and "## Парковка" in text and "Адрес & часы" in text
    assert "x()" not in text and "p{}" not in text


def test_html_document_title_comes_from_title_tag():
    draft = parse_document(
        "<html><head><title>Страница</title></head><body><p>Текст</p></body></html>",
        external_id="a.html",
        suffix=".html",
        default_acl=("everyone",),
    )
    assert draft.title == "Страница" and draft.text == "Текст"
