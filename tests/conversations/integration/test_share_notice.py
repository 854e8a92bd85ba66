"""Sharing a thread tells the colleague: a notice in the bell, live on their open websocket, and an
e-mail through a real SMTP server when they opted in; it names the thread and its owner and links to
the shared page. Sharing again and revoking send nothing."""

from __future__ import annotations

import asyncio
import email
import email.policy
import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client

from achilles.models import Notification
from achilles.tasks import notification_email_task
from tests.achilles.integration.test_notifications import smtp_server  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.integration]


def _share(owner, conversation_id, username: str) -> int:
    client = Client()
    client.force_login(owner)
    try:
        return client.post(
            f"/api/conversations/{conversation_id}/shares", {"username": username}, content_type="application/json"
        ).status_code
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_the_reader_gets_the_notice_live_on_their_socket(user_factory, conversation_factory):
    # given: the reader has the web app open (their websocket joined their account's group)
    owner = user_factory(username="hr-lead", first_name="Анна", last_name="Кадрова")
    reader = user_factory(username="reader")
    thread = conversation_factory(owner, [("user", "Сколько дней отпуска?")], title="Отпуск")
    client = Client()
    client.force_login(reader)
    headers = [
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
        (b"host", b"testserver"),
        (b"origin", b"http://testserver"),
    ]

    async def go():
        from achilles.asgi import application

        ws = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        connected, _ = await ws.connect()
        assert connected
        # when: the owner shares the thread with them
        status = await asyncio.get_running_loop().run_in_executor(None, _share, owner, thread.pk, "reader")
        frame = json.loads(await ws.receive_from(timeout=10))
        await ws.disconnect()
        return status, frame

    status, frame = async_to_sync(go)()
    # then
    assert status == 201
    assert frame["event"] == "notification"
    notice = frame["notification"]
    assert notice["title"] == "Анна Кадрова открывает вам тред «Отпуск»"
    assert notice["link"] == f"/chat/shared/{thread.pk}/" and notice["read_at"] is None
    assert Notification.objects.get(user=reader).kind == "thread_shared"


@pytest.mark.django_db
def test_sharing_again_and_revoking_send_no_notice(
    user_factory, conversation_factory, asgi_client, django_capture_on_commit_callbacks
):
    owner, reader = user_factory(username="owner"), user_factory(username="reader")
    thread = conversation_factory(owner, [("user", "?")], title="Тред")
    client = asgi_client(owner)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/api/conversations/{thread.pk}/shares", json={"username": "reader"}).status_code == 201
        assert client.post(f"/api/conversations/{thread.pk}/shares", json={"username": "reader"}).status_code == 201
        assert client.delete(f"/api/conversations/{thread.pk}/shares/{reader.pk}").status_code == 204
    assert Notification.objects.filter(user=reader).count() == 1
    assert not Notification.objects.filter(user=owner).exists()


@pytest.mark.django_db
def test_an_english_reader_who_opted_in_gets_the_notice_by_email(
    smtp_server,  # noqa: F811
    settings,
    user_factory,
    conversation_factory,
    asgi_client,
    django_capture_on_commit_callbacks,
):
    # given: a reader who asked for e-mail and reads the interface in English
    owner = user_factory(username="owner", first_name="Борис", last_name="")
    reader = user_factory(username="reader", email="reader@example.com", notify_by_email=True, language="en")
    thread = conversation_factory(owner, [("user", "?")], title="Бюджет")
    # when: the thread is shared with them (the e-mail task queued after commit, run as the worker would)
    with django_capture_on_commit_callbacks(execute=True):
        response = asgi_client(owner).post(f"/api/conversations/{thread.pk}/shares", json={"username": "reader"})
    assert response.status_code == 201
    notice = Notification.objects.get(user=reader)
    assert notification_email_task(notice.pk) is True
    # then: one message at their address, in their language, with the link to the shared page
    [envelope] = smtp_server.messages
    assert envelope.rcpt_tos == ["reader@example.com"]
    message = email.message_from_bytes(envelope.content, policy=email.policy.default)
    assert message["Subject"].strip() == "Achilles: Борис shares the thread «Бюджет» with you"
    assert f"{settings.PUBLIC_BASE_URL}/chat/shared/{thread.pk}/" in message.get_content()
