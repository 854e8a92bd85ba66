"""The withheld hint in people's words: each source once, by its label, with its authors."""

import pytest

from conversations.hint_display import hint_for_people

pytestmark = [pytest.mark.unit]

ADMIN = {"user_id": 1, "username": "admin", "name": ""}
ANNA = {"user_id": 2, "username": "anna", "name": "Анна"}
LABELS = {"files": "Файлы", "uploads": "Файлы", "confluence:1": "Confluence", "jira": "Jira"}


def test_one_source_with_and_without_an_author_reads_once_by_its_label():
    # given: the stored hint of the report («источник «files»; источник «files», автор — admin»)
    hint = {
        "text": "Есть и релевантные материалы, закрытые для вас правами доступа: источник «files»; "
        "источник «files», автор — admin (можно запросить доступ).",
        "sources": [{"source_system": "files"}, {"source_system": "files", "contact": ADMIN}],
    }
    # when
    shown = hint_for_people(hint, LABELS)
    # then
    assert shown["text"] == (
        "Есть и релевантные материалы, закрытые для вас правами доступа: Файлы (автор — admin; можно запросить доступ)."
    )
    assert shown["sources"] == [{"source_system": "files", "contact": ADMIN, "label": "Файлы"}]
    assert "files" not in shown["text"] and "«" not in shown["text"]


def test_internal_connector_names_never_show_and_two_authors_are_named_together():
    hint = {
        "text": "…",
        "sources": [
            {"source_system": "confluence:1"},
            {"source_system": "uploads", "contact": ANNA},
            {"source_system": "files", "contact": ADMIN},
        ],
    }
    shown = hint_for_people(hint, LABELS)
    assert shown["text"] == (
        "Есть и релевантные материалы, закрытые для вас правами доступа: Confluence; "
        "Файлы (авторы — Анна, admin; можно запросить доступ)."
    )
    assert "confluence:1" not in shown["text"]
    assert [s["label"] for s in shown["sources"]] == ["Confluence", "Файлы", "Файлы"]


def test_a_source_nobody_labelled_keeps_its_key_and_an_empty_hint_stays():
    assert hint_for_people({"text": "x", "sources": [{"source_system": "hr"}]}, {})["text"].endswith(": hr.")
    assert hint_for_people({"text": "x", "sources": []}, LABELS) == {"text": "x", "sources": []}
