"""«Запросить доступ» on the withheld hint (issue 26): ``POST /api/messages/{id}/access-requests``
sends the hint's named contact a notice carrying the reader's question and the source's label only
(never the withheld records), e-mailed when mail is configured and they opted in; only for the
reader's own answer and a (source, contact) pair its hint names; rate-limited."""

from __future__ import annotations

import email
import email.policy

import pytest

from achilles.models import Notification
from achilles.tasks import notification_email_task
from conversations.models import Message
from tests.achilles.integration.test_notifications import smtp_server  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.api, pytest.mark.p1]

QUESTION = "Какой бюджет у проекта «Север» на 2027 год?"
WITHHELD_TITLE = "Бюджет проекта Север 2027 (черновик)"


@pytest.fixture
def setting(user, user_factory, conversation_factory):
    """``user``'s answer whose hint names «finance» with its author Анна (who may see the records)."""
    author = user_factory(username="anna", first_name="Анна", last_name="Петрова", email="anna@example.com")
    thread = conversation_factory(user, [("user", QUESTION)])
    answer = Message.objects.create(
        conversation=thread,
        role="assistant",
        content="Не нашёл ответа в доступных вам материалах.",
        model="fake-chat",
        withheld_hint={
            "text": "Есть закрытые для вас материалы: источник «finance».",
            "sources": [
                {"source_system": "finance", "contact": {"user_id": author.pk, "username": "anna", "name": "Анна"}},
                {"source_system": "files"},
            ],
        },
    )
    return answer, author


def _ask(client, message_id, source_system="finance", contact_id=None):
    return client.post(
        f"/api/messages/{message_id}/access-requests", json={"source_system": source_system, "contact_id": contact_id}
    )


def test_the_named_author_gets_a_notice_with_the_question_and_the_label_only(asgi_client, user, setting):
    answer, author = setting
    # when: the reader asks for access
    response = _ask(asgi_client(user), answer.pk, contact_id=author.pk)
    # then: told whom it went to; the author has a notice in their bell
    assert response.status_code == 201, response.text
    assert response.json() == {
        "contact_name": "Анна",
        "source_label": "finance",
        "detail": "Запрос отправлен: Анна получит уведомление.",
    }
    notice = Notification.objects.get(user=author)
    assert notice.kind == "access_request" and notice.read_at is None
    assert notice.title == f"{user.username} просит доступ к материалам источника «finance»"
    assert notice.body == f"Источник: finance.\nВопрос: «{QUESTION}»"
    # nothing of the withheld records, nothing for anyone else
    assert WITHHELD_TITLE not in notice.title + notice.body
    assert Notification.objects.count() == 1


def test_the_notice_uses_the_sources_display_label(asgi_client, user, setting):
    from knowledge.models import SourcePolicy

    answer, author = setting
    SourcePolicy.objects.update_or_create(source_system="finance", defaults={"display_label": "Финансы"})
    assert _ask(asgi_client(user), answer.pk, contact_id=author.pk).json()["source_label"] == "Финансы"
    assert "«Финансы»" in Notification.objects.get(user=author).title


def test_only_the_readers_own_answer_and_a_contact_its_hint_names(asgi_client, user, user_factory, setting):
    answer, author = setting
    stranger = user_factory(username="eve")
    client = asgi_client(user)
    # another person's answer, an unknown message, a source the hint does not name with this contact,
    # a contact it does not name, a source without a contact: all «not found», nothing sent
    assert _ask(asgi_client(stranger), answer.pk, contact_id=author.pk).status_code == 404
    assert _ask(client, 10**9, contact_id=author.pk).status_code == 404
    assert _ask(client, answer.pk, source_system="hr", contact_id=author.pk).status_code == 404
    assert _ask(client, answer.pk, contact_id=stranger.pk).status_code == 404
    assert _ask(client, answer.pk, source_system="files", contact_id=author.pk).status_code == 404
    # a deactivated author is asked no more
    author.is_active = False
    author.save(update_fields=["is_active"])
    assert _ask(client, answer.pk, contact_id=author.pk).status_code == 404
    assert not Notification.objects.exists()


def test_a_repeat_within_a_day_and_a_flood_are_refused(asgi_client, user, user_factory, conversation_factory, setting):
    answer, author = setting
    client = asgi_client(user)
    assert _ask(client, answer.pk, contact_id=author.pk).status_code == 201
    # the same request again: refused with its own code, no second notice
    again = _ask(client, answer.pk, contact_id=author.pk)
    assert again.status_code == 429 and again.json()["code"] == "access_request_repeated"
    assert Notification.objects.filter(user=author).count() == 1
    # other sources and authors: at most five requests an hour in all
    for n in range(3):
        other = user_factory(username=f"author{n}")
        hint = {"text": "…", "sources": [{"source_system": f"src{n}", "contact": {"user_id": other.pk, "name": "X"}}]}
        Message.objects.filter(pk=answer.pk).update(withheld_hint=hint)
        assert _ask(client, answer.pk, source_system=f"src{n}", contact_id=other.pk).status_code == 201
    last = user_factory(username="author-last")
    hint = {"text": "…", "sources": [{"source_system": "last", "contact": {"user_id": last.pk, "name": "X"}}]}
    Message.objects.filter(pk=answer.pk).update(withheld_hint=hint)
    flood = _ask(client, answer.pk, source_system="last", contact_id=last.pk)
    assert flood.status_code == 429 and flood.json()["code"] == "too_many_requests"
    assert not Notification.objects.filter(user=last).exists()
    # another reader is not limited by this one
    other_reader = user_factory(username="boris")
    thread = conversation_factory(other_reader, [("user", "вопрос")])
    theirs = Message.objects.create(conversation=thread, role="assistant", content="…", withheld_hint=hint)
    assert _ask(asgi_client(other_reader), theirs.pk, source_system="last", contact_id=last.pk).status_code == 201


def test_the_author_gets_it_by_email_when_mail_is_configured(
    asgi_client,
    user,
    setting,
    smtp_server,  # noqa: F811 (the imported fixture)
    django_capture_on_commit_callbacks,
):
    answer, author = setting
    author.notify_by_email = True
    author.save(update_fields=["notify_by_email"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert _ask(asgi_client(user), answer.pk, contact_id=author.pk).status_code == 201
    assert len(callbacks) == 2  # the socket push and the e-mail task
    notice = Notification.objects.get(user=author)
    assert notification_email_task(notice.pk) is True
    [envelope] = smtp_server.messages
    assert envelope.rcpt_tos == ["anna@example.com"]
    message = email.message_from_bytes(envelope.content, policy=email.policy.default)
    assert message["Subject"].strip() == f"Achilles: {user.username} просит доступ к материалам источника «finance»"
    assert QUESTION in message.get_content() and WITHHELD_TITLE not in message.get_content()
