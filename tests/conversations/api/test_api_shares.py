"""Sharing a thread read-only with chosen colleagues, and exporting it (issue 26): the reader sees
the thread, each cited source only when the reader may read it («источник недоступен» otherwise:
no title, no text, no link, no record), under the reader's own access; revoking ends it."""

import io

import pdfplumber
import pytest

from conversations import pipeline
from conversations.models import Citation, ConversationShare
from knowledge.services import record_upsert

pytestmark = [pytest.mark.api, pytest.mark.p1]


@pytest.fixture
def cited_thread(db, user_factory, conversation_factory):
    """hr-lead's thread whose answer cites an open record [1] and an HR-only record [2]."""
    pipeline.set_engine_deps(None)  # the real Knowledge Store: the reader's own ACL decides
    owner = user_factory(username="hr-lead", groups=["hr"])
    open_ = record_upsert(
        source_system="files",
        external_id="pub/vacation.md",
        title="Политика отпусков",
        text="Отпуск — 28 календарных дней.",
        acl=["everyone"],
        url="https://wiki.example.com/vacation",
    ).record_id
    closed = record_upsert(
        source_system="hr",
        external_id="hr/salary.md",
        title="Оклады отдела",
        text="Оклад Иванова — 424242 рубля.",
        acl=["group:hr"],
        url="https://hr.example.com/salary",
    ).record_id
    thread = conversation_factory(
        owner,
        [("user", "Сколько отпуска и какой оклад?"), ("assistant", "Отпуск 28 дней [1]. Оклад известен [2].")],
        title="Отпуск и оклад",
    )
    answer = thread.messages.get(role="assistant")
    for rank, (record_id, title, url, text) in enumerate(
        [
            (open_, "Политика отпусков", "https://wiki.example.com/vacation", "Отпуск — 28 календарных дней."),
            (closed, "Оклады отдела", "https://hr.example.com/salary", "Оклад Иванова — 424242 рубля."),
        ],
        start=1,
    ):
        Citation.objects.create(
            message=answer,
            record_id=record_id,
            chunk_id=None,
            title=title,
            url=url,
            source_system="files" if rank == 1 else "hr",
            chunk_text=text,
            rank=rank,
            markers=[rank],
        )
    yield owner, thread
    pipeline.set_engine_deps(None)


def test_a_reader_without_a_cited_source_sees_it_as_unavailable(asgi_client, cited_thread, user_factory):
    # given: the thread shared with a colleague outside HR
    owner, thread = cited_thread
    reader = user_factory(username="outsider", groups=["it"])
    shared = asgi_client(owner).post(f"/api/conversations/{thread.pk}/shares", json={"username": "outsider"})
    assert shared.status_code == 201, shared.text
    assert shared.json()["username"] == "outsider"

    # when: the reader opens it
    response = asgi_client(reader).get(f"/api/shared/{thread.pk}")

    # then: the thread, the open source whole, the HR source with nothing of it
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["owner"] == "hr-lead" and body["title"] == "Отпуск и оклад"
    answer = body["messages"]["items"][1]
    open_, closed = answer["citations"]
    assert (open_["available"], open_["title"], open_["source_label"]) == (True, "Политика отпусков", "Файлы")
    assert closed == {
        "record_id": None,
        "chunk_id": None,
        "title": "",
        "url": "",
        "source_system": "",
        "source_label": "",
        "chunk_text": "",
        "rank": 2,
        "markers": [2],
        "passages": [],
        "available": False,
    }
    assert "424242" not in response.text and "Оклады" not in response.text
    assert answer["withheld_hint"] is None
    # the owner still sees both; the thread is in the reader's list of shared threads
    own = asgi_client(owner).get(f"/api/conversations/{thread.pk}").json()["messages"]["items"][1]
    assert [c["available"] for c in own["citations"]] == [True, True]
    listed = asgi_client(reader).get("/api/shared").json()["items"]
    assert [(c["id"], c["owner"]) for c in listed] == [(str(thread.pk), "hr-lead")]


def test_an_hr_reader_sees_both_sources(asgi_client, cited_thread, user_factory):
    owner, thread = cited_thread
    reader = user_factory(username="hr-two", groups=["hr"])
    asgi_client(owner).post(f"/api/conversations/{thread.pk}/shares", json={"username": "hr-two"})

    answer = asgi_client(reader).get(f"/api/shared/{thread.pk}").json()["messages"]["items"][1]

    assert [c["title"] for c in answer["citations"]] == ["Политика отпусков", "Оклады отдела"]


def test_revoke_ends_the_reading_and_strangers_never_had_it(asgi_client, cited_thread, user_factory):
    owner, thread = cited_thread
    reader = user_factory(username="outsider", groups=["it"])
    stranger = user_factory(username="stranger")
    owner_client = asgi_client(owner)
    owner_client.post(f"/api/conversations/{thread.pk}/shares", json={"username": "outsider"})
    again = owner_client.post(f"/api/conversations/{thread.pk}/shares", json={"username": "outsider"})
    assert again.status_code == 201 and ConversationShare.objects.filter(conversation=thread).count() == 1
    assert [s["username"] for s in owner_client.get(f"/api/conversations/{thread.pk}/shares").json()["items"]] == [
        "outsider"
    ]

    assert asgi_client(stranger).get(f"/api/shared/{thread.pk}").status_code == 404
    # a reader may not share, revoke or read the thread as its owner
    assert asgi_client(reader).get(f"/api/conversations/{thread.pk}").status_code == 404
    assert asgi_client(reader).get(f"/api/conversations/{thread.pk}/shares").status_code == 404

    revoked = owner_client.delete(f"/api/conversations/{thread.pk}/shares/{reader.pk}")

    assert revoked.status_code == 204
    assert asgi_client(reader).get(f"/api/shared/{thread.pk}").status_code == 404
    assert asgi_client(reader).get(f"/api/shared/{thread.pk}/export").status_code == 404
    assert owner_client.delete(f"/api/conversations/{thread.pk}/shares/{reader.pk}").status_code == 404


def test_sharing_with_oneself_or_an_unknown_login_is_refused(asgi_client, cited_thread):
    owner, thread = cited_thread
    client = asgi_client(owner)

    self_share = client.post(f"/api/conversations/{thread.pk}/shares", json={"username": "hr-lead"})
    unknown = client.post(f"/api/conversations/{thread.pk}/shares", json={"username": "nobody"})

    assert (self_share.status_code, self_share.json()["code"]) == (422, "share_with_owner")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "user_not_found")


def test_export_markdown_has_the_sources_as_footnotes_as_the_exporter_may_read_them(
    asgi_client, cited_thread, user_factory
):
    owner, thread = cited_thread
    reader = user_factory(username="outsider", groups=["it"])
    asgi_client(owner).post(f"/api/conversations/{thread.pk}/shares", json={"username": "outsider"})

    own = asgi_client(owner).get(f"/api/conversations/{thread.pk}/export", params={"format": "markdown"})
    theirs = asgi_client(reader).get(f"/api/shared/{thread.pk}/export")

    assert own.status_code == 200 and own.headers["content-type"].startswith("text/markdown")
    assert "attachment" in own.headers["content-disposition"]
    assert "Отпуск 28 дней[^1]. Оклад известен[^2]." in own.text
    assert "[^1]: Политика отпусков — <https://wiki.example.com/vacation>" in own.text
    assert "[^2]: Оклады отдела — <https://hr.example.com/salary>" in own.text
    assert "[^2]: источник недоступен" in theirs.text
    assert "Оклады" not in theirs.text and "hr.example.com" not in theirs.text


def test_export_pdf_is_a_pdf_with_the_thread_and_its_footnotes(asgi_client, cited_thread, user_factory):
    owner, thread = cited_thread

    response = asgi_client(owner).get(f"/api/conversations/{thread.pk}/export", params={"format": "pdf"})

    assert response.status_code == 200 and response.headers["content-type"] == "application/pdf"
    with pdfplumber.open(io.BytesIO(response.content)) as pdf:
        text = "\n".join(page.extract_text() for page in pdf.pages)
    assert "Отпуск и оклад" in text
    assert "Сколько отпуска и какой оклад?" in text
    assert "Политика отпусков — https://wiki.example.com/vacation" in text
    assert "[1]" not in text  # the markers are footnote numbers now
    assert asgi_client(owner).get(f"/api/conversations/{thread.pk}/export", params={"format": "doc"}).status_code == 422


def test_choose_flips_the_shown_version_and_the_thread_says_where_it_stands(
    asgi_client, user, user_factory, conversation_factory
):
    from conversations.models import Message

    thread = conversation_factory(user, [("user", "Вопрос"), ("assistant", "Старый ответ")])
    question = thread.messages.get(role="user")
    old = thread.messages.get(role="assistant")
    new = Message.objects.create(conversation=thread, role="assistant", content="Новый ответ", parent=question)
    client = asgi_client(user)

    shown = client.get(f"/api/conversations/{thread.pk}").json()["messages"]["items"]
    assert [m["content"] for m in shown] == ["Вопрос", "Новый ответ"]
    assert (shown[1]["sibling_index"], shown[1]["sibling_count"], shown[1]["siblings"]) == (2, 2, [old.pk, new.pk])
    assert (shown[0]["sibling_count"], shown[1]["parent_id"]) == (1, question.pk)

    assert client.post(f"/api/messages/{old.pk}/choose").status_code == 204

    shown = client.get(f"/api/conversations/{thread.pk}").json()["messages"]["items"]
    assert [m["content"] for m in shown] == ["Вопрос", "Старый ответ"]
    assert shown[1]["sibling_index"] == 1
    assert asgi_client(user_factory(username="stranger")).post(f"/api/messages/{old.pk}/choose").status_code == 404
