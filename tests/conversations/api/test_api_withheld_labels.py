"""The withheld hint over the API names each source once, by the label people know it by."""

import pytest

from conversations.models import Message
from knowledge.models import SourcePolicy

pytestmark = [pytest.mark.api, pytest.mark.django_db]


def test_the_hint_names_files_once_by_label_with_its_author(user, user_factory, asgi_client, conversation_factory):
    # given: the stored hint of the report — «files» twice, once with its author
    admin = user_factory(username="admin", email="admin@example.com")
    stored = {
        "text": "Есть и релевантные материалы, закрытые для вас правами доступа: источник «files»; "
        "источник «files», автор — admin (можно запросить доступ).",
        "sources": [
            {"source_system": "files"},
            {"source_system": "files", "contact": {"user_id": admin.pk, "username": "admin", "name": ""}},
            {"source_system": "confluence:1"},
        ],
    }
    conversation = conversation_factory(user, [("user", "Какой бюджет?")])
    Message.objects.create(
        conversation=conversation, role="assistant", model="fake-chat", content="Не нашёл.", withheld_hint=stored
    )
    # when
    hint = asgi_client(user).get(f"/api/conversations/{conversation.pk}").json()["messages"]["items"][1]
    hint = hint["withheld_hint"]
    # then
    assert hint["text"] == (
        "Есть и релевантные материалы, закрытые для вас правами доступа: "
        "Файлы (автор — admin; можно запросить доступ); Confluence."
    )
    assert [s["label"] for s in hint["sources"]] == ["Файлы", "Confluence"]
    assert hint["sources"][0]["contact"] == {"user_id": admin.pk, "username": "admin", "name": ""}


def test_an_admins_label_for_a_source_is_the_one_shown(user, asgi_client, conversation_factory):
    SourcePolicy.objects.create(source_system="confluence:1", display_label="Вики продаж")
    conversation = conversation_factory(user, [("user", "?")])
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        model="fake-chat",
        content="Не нашёл.",
        withheld_hint={"text": "…", "sources": [{"source_system": "confluence:1"}]},
    )
    item = asgi_client(user).get(f"/api/conversations/{conversation.pk}").json()["messages"]["items"][1]
    assert item["withheld_hint"]["text"].endswith(": Вики продаж.")


def test_a_citation_names_its_source_by_label_beside_its_key(user, asgi_client, conversation_factory):
    # given: an answer citing a Confluence connector's page and an uploaded file
    SourcePolicy.objects.create(source_system="confluence:1", display_label="Вики продаж")
    conversation = conversation_factory(user, [("user", "Какой план продаж?")])
    answer = Message.objects.create(
        conversation=conversation, role="assistant", model="fake-chat", content="План [1], бюджет [2]."
    )
    for rank, system in enumerate(["confluence:1", "files"], start=1):
        answer.citations.create(
            record_id=None, chunk_id=None, title=f"Док {rank}", url="", source_system=system, rank=rank, markers=[rank]
        )
    # when
    item = asgi_client(user).get(f"/api/conversations/{conversation.pk}").json()["messages"]["items"][1]
    # then: the label people know (an admin's own, else the kind's), the internal key kept beside it
    assert [(c["source_system"], c["source_label"]) for c in item["citations"]] == [
        ("confluence:1", "Вики продаж"),
        ("files", "Файлы"),
    ]
