"""Notices (the web app's bell): the table's constraints, the REST routes (own notices only), the
live frame on the account's websocket, the settings switch and the e-mail to a real SMTP server."""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import socket

import pytest
from aiosmtpd.controller import Controller
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import IntegrityError, connection, transaction
from django.test import Client

from achilles.models import Notification
from achilles.notifications import notification_create, notify_on_commit
from achilles.tasks import notification_email_task
from tests.achilles.factories import UserFactory

pytestmark = [pytest.mark.integration]


def _notice(user, **kw) -> Notification:
    fields = {
        "kind": "agent_run",
        "title": "Агент «Сводка» закончил работу",
        "body": "Запуск выполнен.",
        "link": "/agents/",
    }
    return notification_create(user_id=user.pk, **{**fields, **kw})


# ---------------------------------------------------------------- the database says no


def _raw_insert(user_id: int, kind: str = "agent_run", title: str = "t", link: str = "") -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO notifications (user_id, kind, title, body, link) VALUES (%s, %s, %s, '', %s)",
            [user_id, kind, title, link],
        )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "title", "link", "constraint"),
    [
        ("mystery", "t", "", "achilles_notification_kind_known"),
        ("agent_run", "", "", "achilles_notification_title_not_empty"),
        ("hub_batch", "t", "https://evil.example/", "achilles_notification_link_local"),
        ("hub_batch", "t", "//evil.example/", "achilles_notification_link_local"),
    ],
)
def test_raw_sql_breaking_a_constraint_is_refused(user, kind, title, link, constraint):
    with pytest.raises(IntegrityError, match=constraint):
        _raw_insert(user.pk, kind=kind, title=title, link=link)


@pytest.mark.django_db
def test_deleting_a_person_in_sql_deletes_their_notices(user):
    _raw_insert(user.pk, link="/hub/")
    other = UserFactory()
    _raw_insert(other.pk)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM users WHERE id = %s", [user.pk])
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert list(Notification.objects.values_list("user_id", flat=True)) == [other.pk]


# ---------------------------------------------------------------- REST


@pytest.mark.django_db
def test_the_list_shows_only_the_callers_notices_newest_first(user, client_for):
    first, second = _notice(user, title="первое"), _notice(user, title="второе")
    _notice(UserFactory(), title="чужое")
    body = client_for(user).get("/api/notifications").json()
    assert [n["id"] for n in body["items"]] == [second.pk, first.pk]
    assert body["next_cursor"] is None
    assert body["items"][0]["title"] == "второе" and body["items"][0]["read_at"] is None


@pytest.mark.django_db
def test_marking_read_one_and_all_and_the_unread_count(user, client_for):
    client = client_for(user)
    one, _two, _three = _notice(user), _notice(user), _notice(user)
    assert client.get("/api/notifications/unread").json() == {"count": 3}
    response = client.post(f"/api/notifications/{one.pk}/read")
    assert response.status_code == 200 and response.json()["read_at"] is not None
    assert client.post(f"/api/notifications/{one.pk}/read").status_code == 200  # idempotent
    assert client.get("/api/notifications/unread").json() == {"count": 2}
    assert client.post("/api/notifications/read-all").json() == {"count": 0}
    assert not Notification.objects.filter(user=user, read_at__isnull=True).exists()


@pytest.mark.django_db
def test_another_persons_notice_is_404_and_stays_unread(user, client_for):
    theirs = _notice(UserFactory())
    response = client_for(user).post(f"/api/notifications/{theirs.pk}/read")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    client_for(user).post("/api/notifications/read-all")
    theirs.refresh_from_db()
    assert theirs.read_at is None


@pytest.mark.django_db
def test_the_routes_need_a_sign_in(user):
    assert Client().get("/api/notifications").status_code == 401
    assert Client().post("/api/notifications/read-all").status_code == 401


@pytest.mark.django_db
def test_patch_me_switches_the_email_notices(user, client_for):
    client = client_for(user)
    assert client.get("/api/me").json()["notify_by_email"] is False
    response = client.patch("/api/me", {"notify_by_email": True}, content_type="application/json")
    assert response.status_code == 200 and response.json()["notify_by_email"] is True
    user.refresh_from_db()
    assert user.notify_by_email is True


@pytest.mark.django_db
@pytest.mark.parametrize("value", [0, 1, "true", "yes"])
def test_patch_me_refuses_a_switch_that_is_not_a_json_boolean(user, client_for, value):
    # make fuzz: {"notify_by_email": 0} was read as false and answered 200
    client = client_for(user)
    response = client.patch("/api/me", {"notify_by_email": value}, content_type="application/json")
    assert response.status_code == 422, response.content
    user.refresh_from_db()
    assert user.notify_by_email is False


@pytest.mark.django_db
def test_the_settings_page_form_switches_the_email_notices(user, client_for):
    client = client_for(user)
    assert "notify_by_email" in client.get("/settings/").content.decode()
    client.post(
        "/settings/", {"timezone": "", "first_name": "", "last_name": "", "email": user.email, "notify_by_email": "on"}
    )
    user.refresh_from_db()
    assert user.notify_by_email is True
    client.post("/settings/", {"timezone": "", "first_name": "", "last_name": "", "email": user.email})
    user.refresh_from_db()
    assert user.notify_by_email is False


# ---------------------------------------------------------------- after commit


@pytest.mark.django_db
def test_a_rolled_back_announcement_leaves_no_notice(user, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        try:
            with transaction.atomic():
                notify_on_commit(user_id=user.pk, kind="agent_run", title="x")
                raise RuntimeError("the run's transaction fails")
        except RuntimeError:
            pass
    assert not Notification.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_new_notice_reaches_the_accounts_open_websocket(user):
    from achilles.asgi import application

    client = Client()
    client.force_login(user)
    headers = [
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
        (b"host", b"testserver"),
        (b"origin", b"http://testserver"),
    ]

    async def go():
        ws = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        connected, _ = await ws.connect()
        assert connected
        # the notice is written once the socket has joined its account's group
        await asyncio.get_running_loop().run_in_executor(None, _create_and_close, user.pk)
        frame = json.loads(await ws.receive_from(timeout=10))
        await ws.disconnect()
        return frame

    frame = async_to_sync(go)()
    assert frame["event"] == "notification"
    assert frame["notification"]["title"] == "Агент «Сводка» закончил работу"
    assert frame["notification"]["link"] == "/agents/" and frame["notification"]["read_at"] is None


def _create_and_close(user_id: int) -> None:
    try:
        notification_create(user_id=user_id, kind="agent_run", title="Агент «Сводка» закончил работу", link="/agents/")
    finally:
        connection.close()


# ---------------------------------------------------------------- e-mail


class _Inbox:
    def __init__(self) -> None:
        self.messages: list = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's handler name)
        self.messages.append(envelope)
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def smtp_server(settings):
    """A real SMTP server (aiosmtpd) on a free port; the platform's mail settings point at it."""
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_CONFIGURED = True
    settings.DEFAULT_FROM_EMAIL = "achilles@example.com"
    try:
        yield inbox
    finally:
        controller.stop()


@pytest.mark.django_db
def test_an_opted_in_person_gets_the_notice_by_email_through_smtp(
    smtp_server, settings, django_capture_on_commit_callbacks
):
    # given a person who asked for e-mail
    person = UserFactory(email="demo@example.com", notify_by_email=True)
    # when a notice is written, its e-mail task is queued after commit (captured here, not sent to the broker)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        notice = _notice(person, title="Пакет #7 «Релиз» завершён", body="Пакет хаба завершён.", link="/hub/")
    assert len(callbacks) == 2  # the socket push and the e-mail task
    # and the task's body runs as the worker would run it
    assert notification_email_task(notice.pk) is True
    # then the SMTP server received the message, once
    assert len(smtp_server.messages) == 1
    envelope = smtp_server.messages[0]
    assert envelope.rcpt_tos == ["demo@example.com"] and envelope.mail_from == "achilles@example.com"
    message = email.message_from_bytes(envelope.content, policy=email.policy.default)
    assert message["Subject"].strip() == "Achilles: Пакет #7 «Релиз» завершён"
    assert message.get_content().split() == ["Пакет", "хаба", "завершён.", f"{settings.PUBLIC_BASE_URL}/hub/"]
    notice.refresh_from_db()
    assert notice.emailed_at is not None
    assert notification_email_task(notice.pk) is False  # a duplicate delivery sends nothing
    assert len(smtp_server.messages) == 1


@pytest.mark.django_db
def test_no_email_without_the_opt_in_or_without_mail_configured(
    smtp_server, settings, django_capture_on_commit_callbacks
):
    quiet = UserFactory(email="quiet@example.com", notify_by_email=False)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        notice = _notice(quiet)
    assert len(callbacks) == 1  # the socket push only
    assert notification_email_task(notice.pk) is False
    # opted in, but the server has no mail configured
    keen = UserFactory(email="keen@example.com", notify_by_email=True)
    settings.EMAIL_CONFIGURED = False
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        notice = _notice(keen)
    assert len(callbacks) == 1
    assert notification_email_task(notice.pk) is False
    assert smtp_server.messages == []
