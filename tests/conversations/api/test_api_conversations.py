"""Чтение треда — тело · владение · 404 (seed: test_api_conversations.py, API · P1), plus the rest
of the conversations API (QE-17): list, rename / switch model, delete, feedback, citation click,
the 401 of /api/chat. The API is called through the ASGI application (``asgi_client``: httpx);
only the chat page's HTML is fetched with Django's client."""

import json
import re
import uuid

import pytest
from django.test import Client

from conversations.models import Citation, Conversation, Message
from tests.conversations.http import bearer, chat
from tests.llm_fake import answer

pytestmark = [pytest.mark.api, pytest.mark.p1]


def _cite(message, record_id, rank=1):
    return Citation.objects.create(
        message=message,
        record_id=record_id,
        chunk_id=record_id * 10,
        title=f"Док {record_id}",
        url=f"https://kb/{record_id}",
        source_system="files",
        chunk_text="опора",
        rank=rank,
        markers=[rank, rank + 2],
    )


def test_read_thread(asgi_client, user, conversation_factory):
    """чтение треда: GET своей беседы → 200; сообщения user+assistant по порядку, цитаты у своих assistant."""
    thread = conversation_factory(user, [("user", "В1"), ("assistant", "О1"), ("user", "В2"), ("assistant", "О2")])
    first_answer, second_answer = thread.messages.filter(role="assistant").order_by("id")
    _cite(first_answer, 7)
    _cite(second_answer, 8)
    _cite(second_answer, 9, rank=2)

    response = asgi_client(user).get(f"/api/conversations/{thread.pk}")

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(thread.pk) and body["title"] == thread.title
    messages = body["messages"]["items"]
    assert body["messages"]["next_cursor"] is None
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "В1"),
        ("assistant", "О1"),
        ("user", "В2"),
        ("assistant", "О2"),
    ]
    assert [[c["record_id"] for c in m["citations"]] for m in messages] == [[], [7], [], [8, 9]]
    assert [c["markers"] for c in messages[3]["citations"]] == [[1, 3], [2, 4]]
    assert messages[1]["model"] == "fake-chat" and messages[0]["model"] is None


def test_unknown_thread_404(asgi_client, user):
    """несуществующий тред → 404: неизвестный {id} → 404, не 500."""
    client = asgi_client(user)
    for unknown in (uuid.uuid4(), "not-a-uuid", "1"):
        response = client.get(f"/api/conversations/{unknown}")
        assert response.status_code == 404, unknown
        assert response.json()["code"] == "not_found"


def test_foreign_thread_404(asgi_client, user_factory, conversation_factory):
    """чужой тред → 404, не 403 (anti-IDOR); запрос без сессии → 401."""
    alice, mallory = user_factory(username="alice"), user_factory(username="mallory")
    thread = conversation_factory(alice, [("user", "секрет")])

    assert asgi_client(mallory).get(f"/api/conversations/{thread.pk}").status_code == 404
    assert asgi_client(mallory).patch(f"/api/conversations/{thread.pk}", json={"title": "x"}).status_code == 404
    assert asgi_client(mallory).delete(f"/api/conversations/{thread.pk}").status_code == 404
    anonymous = asgi_client().get(f"/api/conversations/{thread.pk}")
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "not_authenticated"
    assert Conversation.objects.filter(pk=thread.pk).exists()


def test_history_under_the_common_list_contract(asgi_client, user, conversation_factory):
    """история под единым контрактом: пагинация сообщений — курсор · лимит · порядок. The thread
    carries its first page in the one envelope; the next pages come from its messages list, the
    API's common list contract (conformance: tests/achilles/api/test_list_contract.py)."""
    thread = conversation_factory(user, [("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(5)])
    client = asgi_client(user)

    def walk(order):
        body = client.get(f"/api/conversations/{thread.pk}", params={"limit": 2, "order": order}).json()
        page = body["messages"]
        seen = [[m["content"] for m in page["items"]]]
        while page["next_cursor"] is not None:
            page = client.get(
                f"/api/conversations/{thread.pk}/messages",
                params={"limit": 2, "order": order, "cursor": page["next_cursor"]},
            ).json()
            seen.append([m["content"] for m in page["items"]])
        return seen

    assert walk("asc") == [["m0", "m1"], ["m2", "m3"], ["m4"]]
    assert walk("desc") == [["m4", "m3"], ["m2", "m1"], ["m0"]]
    messages = f"/api/conversations/{thread.pk}/messages"
    assert client.get(messages, params={"cursor": "%%%"}).status_code == 422
    # an ascending walk's cursor does not continue a descending one
    asc_cursor = client.get(messages, params={"limit": 2}).json()["next_cursor"]
    refused = client.get(messages, params={"order": "desc", "cursor": asc_cursor})
    assert refused.status_code == 422 and refused.json()["code"] == "bad_cursor"
    # the thread itself takes no cursor: its next pages are the messages list's
    assert client.get(f"/api/conversations/{thread.pk}", params={"cursor": asc_cursor}).status_code == 422
    for path in (f"/api/conversations/{thread.pk}", messages):
        assert client.get(path, params={"limit": 0}).status_code == 422
        assert client.get(path, params={"order": "sideways"}).status_code == 422


@pytest.mark.django_db(transaction=True)
def test_lazy_thread_creation(engine, user):
    """ленивое создание треда: первое сообщение создаёт строку conversations и возвращает id; POST /conversations не нужен."""
    engine.script(answer("Здравствуйте!"))
    assert Conversation.objects.count() == 0

    status, headers, events = chat(bearer(user), {"content": "Привет"})

    assert status == 200
    done = events[-1][1]
    assert headers["x-conversation-id"] == done["conversation_id"]
    conversation = Conversation.objects.get()
    assert str(conversation.pk) == done["conversation_id"] and conversation.user == user
    assert [m.role for m in conversation.messages.order_by("id")] == ["user", "assistant"]
    assert "post" not in {m.lower() for m in _methods("/api/conversations")}


def _methods(path):
    from achilles.api import api

    return set(api.get_openapi_schema(path_prefix="/api")["paths"].get(path, {}))


# --- the rest of QE-17 ----------------------------------------------------------------------------


def test_list_own_conversations_cursor_paginated(asgi_client, user_factory, conversation_factory):
    alice, bob = user_factory(username="alice"), user_factory(username="bob")
    own = [conversation_factory(alice, [("user", f"q{i}")]) for i in range(3)]
    conversation_factory(bob, [("user", "чужое")])
    client = asgi_client(alice)

    first = client.get("/api/conversations", params={"limit": 2}).json()
    second = client.get("/api/conversations", params={"limit": 2, "cursor": first["next_cursor"]}).json()

    ids = [c["id"] for c in first["items"] + second["items"]]
    assert sorted(ids) == sorted(str(c.pk) for c in own)
    assert second["next_cursor"] is None


@pytest.mark.parametrize("length", [2, 40])
def test_reading_a_thread_costs_constant_queries(
    asgi_client, user, conversation_factory, django_assert_num_queries, length
):
    thread = conversation_factory(user, [("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(length)])
    for message in thread.messages.filter(role="assistant"):
        _cite(message, message.pk)
    client = asgi_client(user)

    # the token, its user and the reader's groups (auth: one statement, was two), the conversation, the
    # branch it shows (its messages' ids and parents), its messages, their citations, which cited
    # records they may still see and the labels of the cited sources — whatever the length.
    with django_assert_num_queries(8):
        response = client.get(f"/api/conversations/{thread.pk}", params={"limit": 200})

    assert len(response.json()["messages"]["items"]) == length


def test_patch_selected_model_validated_and_sticky(asgi_client, user, conversation_factory, model_factory, chat_model):
    model_factory(name="big-chat", provider="builtin")
    model_factory(name="embedder", provider="hash", kind="embedding")
    thread = conversation_factory(user, [("user", "q"), ("assistant", "a")])
    client = asgi_client(user)

    for bad in ("gpt-unlisted", "embedder"):
        refused = client.patch(f"/api/conversations/{thread.pk}", json={"selected_model": bad})
        assert refused.status_code == 422, bad
    assert Conversation.objects.get(pk=thread.pk).selected_model_id is None

    switched = client.patch(f"/api/conversations/{thread.pk}", json={"selected_model": "big-chat", "title": "Новое"})
    assert switched.status_code == 200
    assert switched.json()["selected_model"] == "big-chat" and switched.json()["title"] == "Новое"
    assert Message.objects.get(conversation=thread, role="assistant").model == "fake-chat"

    cleared = client.patch(f"/api/conversations/{thread.pk}", json={"selected_model": None})
    assert cleared.json()["selected_model"] is None
    assert client.patch(f"/api/conversations/{thread.pk}", json={"title": ""}).status_code == 422
    assert client.patch(f"/api/conversations/{thread.pk}", json={"owner": 1}).status_code == 422


def test_delete_conversation(asgi_client, user, conversation_factory):
    thread = conversation_factory(user, [("user", "q"), ("assistant", "a")])
    client = asgi_client(user)

    assert client.delete(f"/api/conversations/{thread.pk}").status_code == 204
    assert client.get(f"/api/conversations/{thread.pk}").status_code == 404
    assert not Message.objects.exists()


def test_feedback_put(asgi_client, user, user_factory, conversation_factory):
    thread = conversation_factory(user, [("user", "q"), ("assistant", "a")])
    question, reply = thread.messages.order_by("id")
    client = asgi_client(user)

    def put(message, value):
        return client.put(f"/api/messages/{message.pk}/feedback", json={"value": value})

    assert put(reply, 1).json() == {"id": reply.pk, "feedback": 1}
    assert put(reply, -1).json()["feedback"] == -1
    assert put(reply, None).json()["feedback"] is None
    assert put(reply, 2).status_code == 422
    assert put(question, 1).status_code == 422
    assert (
        asgi_client(user_factory(username="eve"))
        .put(f"/api/messages/{reply.pk}/feedback", json={"value": 1})
        .status_code
        == 404
    )
    assert client.put("/api/messages/999999/feedback", json={"value": 1}).status_code == 404


def test_citation_click_registers_access(engine, asgi_client, user, user_factory, conversation_factory):
    thread = conversation_factory(user, [("user", "q"), ("assistant", "a")])
    reply = thread.messages.get(role="assistant")
    _cite(reply, 42)
    client = asgi_client(user)

    assert client.post(f"/api/messages/{reply.pk}/citations/42/click").status_code == 204
    assert client.post(f"/api/messages/{reply.pk}/citations/43/click").status_code == 404
    assert (
        asgi_client(user_factory(username="eve")).post(f"/api/messages/{reply.pk}/citations/42/click").status_code
        == 404
    )

    [(record_id, identity, kind, message_id)] = engine.ks.accesses
    assert (record_id, kind, message_id) == (42, "click", str(reply.pk))
    assert identity.user_id == user.pk


def test_a_citation_closed_to_the_reader_since_keeps_its_place_but_not_its_text(
    engine, asgi_client, user, conversation_factory
):
    # given an answer citing records 42 and 43; 43 was since deleted or closed to this reader
    thread = conversation_factory(user, [("user", "q"), ("assistant", "a")])
    reply = thread.messages.get(role="assistant")
    _cite(reply, 42)
    _cite(reply, 43, rank=2)
    engine.ks.closed_records = {43}
    client = asgi_client(user)

    # when the thread is read, the stored copy of 43 is withheld; 42 shows as before
    [answer] = [
        m for m in client.get(f"/api/conversations/{thread.pk}").json()["messages"]["items"] if m["role"] == "assistant"
    ]
    open_, closed = answer["citations"]
    assert (open_["record_id"], open_["available"], open_["title"], open_["chunk_text"]) == (
        42,
        True,
        "Док 42",
        "опора",
    )
    assert (closed["record_id"], closed["available"], closed["title"], closed["url"], closed["chunk_text"]) == (
        43,
        False,
        "",
        "",
        "",
    )
    assert closed["markers"] == [2, 4]  # the answer's [2] still has its place
    # and a click on it is refused like an unknown citation, with no access signal
    assert client.post(f"/api/messages/{reply.pk}/citations/43/click").status_code == 404
    assert engine.ks.accesses == []


@pytest.mark.django_db(transaction=True)
def test_chat_endpoint_auth_and_validation(engine, user, user_factory, conversation_factory):
    engine.script()
    status, _, body = chat({}, {"content": "Привет"})
    assert status == 401 and body["code"] == "not_authenticated"
    status, _, body = chat({"Authorization": "Bearer ach_nope"}, {"content": "Привет"})
    assert status == 401

    headers = bearer(user)
    for bad in ({}, {"content": ""}, {"content": "x", "conversation_id": "nope"}, {"content": "x", "role": "system"}):
        status, _, body = chat(headers, bad)
        assert status == 422 and body["code"] == "validation_error", bad

    foreign = conversation_factory(user_factory(username="other"), [("user", "q")])
    status, _, body = chat(headers, {"content": "x", "conversation_id": str(foreign.pk)})
    assert status == 404 and body["code"] == "not_found"
    # who asks is decided before what is asked: a bad body without credentials is still a 401
    status, _, body = chat({}, {"content": ""})
    assert status == 401 and body["code"] == "not_authenticated"
    assert engine.model.calls == []


def test_chat_endpoint_session_needs_csrf(engine, user, asgi_client):
    client = asgi_client(user, session=True)
    del client.headers["X-CSRFToken"]  # the session and the CSRF cookie, but no token in the request
    response = client.post("/api/chat", json={"content": "Привет"})
    assert response.status_code == 403
    assert client.post("/api/chat", json={"content": ""}).status_code == 403  # CSRF before the body's 422
    assert engine.model.calls == []
    assert asgi_client().get("/api/chat").status_code == 405


def test_chat_page_needs_sign_in(client_for, user):
    assert Client().get("/chat/").status_code == 302
    client = client_for(user)
    page = client.get("/chat/")
    assert page.status_code == 200
    # the page's script (a static file since the pages pass a CSP without inline script) opens the socket
    script = re.search(rb'src="(/static/achilles/chat\.[0-9a-f]+\.js)"', page.content).group(1).decode()
    assert b"/ws/chat/" in b"".join(client.get(script).streaming_content)


def test_an_answer_comes_with_its_markdown_rendered_and_sanitised(user, asgi_client, conversation_factory):
    """``content_html``: the answer's Markdown rendered on the server, raw HTML inert, [N] linked to
    the source card; the withheld hint is left to its own notice; questions stay plain text."""
    from conversations.models import Message

    hint = {"text": "Часть материалов закрыта: источник «hr».", "sources": [{"source_system": "hr"}]}
    conversation = conversation_factory(user, [("user", "Сколько **дней**?")])
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        model="fake-chat",
        content="| a | b |\n|---|---|\n| 1 | 2 |\n\n<script>x()</script> 28 дней [1].\n\n" + hint["text"],
        withheld_hint=hint,
    )
    answer.citations.create(
        record_id=None,
        chunk_id=None,
        title="Политика",
        url="https://kb.example/1",
        source_system="files",
        chunk_text="28 дней",
        rank=1,
        markers=[1],
    )
    body = asgi_client(user).get(f"/api/conversations/{conversation.pk}").json()
    question, reply = body["messages"]["items"]
    assert question["content_html"] is None
    html = reply["content_html"]
    assert "<table>" in html and "&lt;script&gt;" in html and "<script" not in html
    assert f'href="#src-{answer.pk}-1"' in html
    assert "закрыта" not in html and reply["content"].endswith(hint["text"])
    # the hint itself in people's words (conversations.hint_display): the source once, by its label
    assert reply["withheld_hint"]["sources"] == [{"source_system": "hr", "label": "hr"}]


def test_a_withheld_hint_names_its_contacts_without_handing_out_their_addresses(
    user, user_factory, asgi_client, conversation_factory
):
    """Access is asked for through POST /messages/{id}/access-requests: the hint carries no mailto."""
    from conversations.models import Message

    anna = user_factory(username="anna", email="anna@example.com", first_name="Анна")
    boris = user_factory(username="boris", email="")
    hint = {
        "text": "Есть закрытые материалы.",
        "sources": [
            {"source_system": "hr", "contact": {"user_id": anna.pk, "username": "anna", "name": "Анна"}},
            {"source_system": "finance", "contact": {"user_id": boris.pk, "username": "boris", "name": ""}},
            {"source_system": "wiki"},
        ],
    }
    conversation = conversation_factory(user, [("user", "Какая зарплата?")])
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        model="fake-chat",
        content="Не нашёл.\n\n" + hint["text"],
        withheld_hint=hint,
    )
    sources = (
        asgi_client(user)
        .get(f"/api/conversations/{conversation.pk}")
        .json()["messages"]["items"][1]["withheld_hint"]["sources"]
    )
    assert sources[0]["contact"] == {"user_id": anna.pk, "username": "anna", "name": "Анна"}
    assert sources[1]["contact"] == {"user_id": boris.pk, "username": "boris", "name": ""}
    assert "contact" not in sources[2]
    assert "anna@example.com" not in json.dumps(sources)
