"""Sign-in with LDAP / Active Directory and the directory sync, against a real slapd (issue 24).

Everything is configured the way an operator does it: the LDAP_* environment, parsed by the same
``directory_config`` the settings call. The sign-in goes through the real sign-in page.
"""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client

from achilles.directory.config import directory_config
from achilles.directory.sync import directory_sync
from achilles.errors import ServiceUnavailable
from achilles.models import AuditEvent, User
from achilles.services import api_token_create, user_active_set
from knowledge import facade
from knowledge.contracts import Identity
from tests.achilles.directory_server import PASSWORDS, Directory, slapd_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def configure(settings, env: dict[str, str]) -> None:
    settings.LDAP_DIRECTORY = directory_config(env)
    settings.AUTHENTICATION_BACKENDS = [
        "axes.backends.AxesStandaloneBackend",
        "achilles.directory.backends.LocalPasswordBackend",
        "achilles.directory.backends.DirectoryBackend",
    ]


@pytest.fixture
def directory(slapd_server, settings):  # noqa: F811
    tree = Directory(slapd_server)
    tree.seed()
    configure(settings, tree.env())
    yield tree
    tree.conn.unbind_s()


def sign_in(username: str, password: str | None = None) -> tuple[Client, int]:
    client = Client()
    answer = client.post(
        LOGIN, {"username": username, "password": password or PASSWORDS[username]}, REMOTE_ADDR="203.0.113.9"
    )
    return client, answer.status_code


def group_principals(client: Client) -> set[str]:
    answer = client.get("/api/me")
    assert answer.status_code == 200, answer.content
    return {p for p in answer.json()["principals"] if p.startswith("group:")}


def test_a_directory_user_signs_in_on_the_page_and_me_lists_nested_groups(directory):
    # when
    client, status = sign_in("alice")
    # then: mirrored groups, the nested one included; the unmirrored group is ignored
    assert status == 302
    assert group_principals(client) == {"group:achilles-eng", "group:achilles-all"}
    assert client.get("/api/me").json()["source"] == "ldap"
    alice = User.objects.get(username="alice")
    assert (alice.source, alice.email, alice.first_name, alice.last_name) == (
        "ldap",
        "alice@example.com",
        "Alice",
        "Aliceson",
    )
    assert alice.timezone == "Europe/Berlin"
    assert not alice.has_usable_password()
    assert AuditEvent.objects.get(action="signin").details["method"] == "ldap"
    assert AuditEvent.objects.filter(action="directory_user_created", target=f"user:{alice.pk}").exists()
    changed = AuditEvent.objects.get(action="directory_groups_changed")
    assert (changed.details["added"], changed.details["removed"], changed.details["via"]) == (
        ["achilles-all", "achilles-eng"],
        [],
        "signin",
    )


@pytest.mark.parametrize(
    ("group_type", "groups"),
    [
        ("groupOfNames", {"achilles-eng"}),
        ("nested_groupOfNames", {"achilles-eng", "achilles-all"}),
        ("active_directory", {"achilles-ad-eng"}),
        ("nested_active_directory", {"achilles-ad-eng", "achilles-ad-all"}),
        ("posix", {"achilles-posix"}),
    ],
)
def test_each_group_type_finds_its_groups_nested_ones_only_when_nested(directory, settings, group_type, groups):
    configure(settings, directory.env(LDAP_GROUP_TYPE=group_type))
    client, status = sign_in("alice")
    assert status == 302
    assert group_principals(client) == {f"group:{name}" for name in groups}


def test_signing_in_again_is_authoritative_for_mirrored_groups_only(directory):
    sign_in("alice")
    alice = User.objects.get(username="alice")
    alice.groups.add(Group.objects.create(name="hand-picked"), Group.objects.create(name="achilles-stale"))
    # when
    client, status = sign_in("alice")
    # then: the stale mirrored group is gone, the hand-set one (outside the filter) stays
    assert status == 302
    assert set(alice.groups.values_list("name", flat=True)) == {"achilles-eng", "achilles-all", "hand-picked"}


def test_removed_from_a_group_in_the_directory_the_sync_takes_its_documents_out_of_search(directory):
    client, _ = sign_in("alice")
    alice = User.objects.get(username="alice")
    record = facade.upsert_record(
        source_system="test",
        external_id="handbook",
        title="Инженерный регламент дежурств",
        text="Регламент дежурств инженерной службы: кто дежурит по выходным.",
        acl=["group:achilles-all"],
    )
    assert record in [c.record_id for c in facade.search("регламент дежурств", Identity.for_user(alice)).candidates]
    # when: alice leaves achilles-eng (and with it achilles-all, reached through it)
    directory.remove_member("achilles-eng", directory.user_dn("alice"))
    report = directory_sync()
    # then
    assert (report.checked, report.groups_changed, report.deactivated) == (1, 1, 0)
    assert group_principals(client) == set()
    alice = User.objects.get(pk=alice.pk)
    assert record not in [c.record_id for c in facade.search("регламент дежурств", Identity.for_user(alice)).candidates]
    changed = AuditEvent.objects.filter(action="directory_groups_changed").latest("id")
    assert (changed.actor, changed.details["removed"], changed.details["via"]) == (
        "directory_sync",
        ["achilles-all", "achilles-eng"],
        "sync",
    )


def test_disabled_in_the_directory_the_sync_deactivates_tokens_sessions_and_agents(directory):
    from tests.agents.conftest import AgentFactory

    client, _ = sign_in("alice")
    alice = User.objects.get(username="alice")
    _, token = api_token_create(user=alice)
    agent = AgentFactory(owner=alice, enabled=True)
    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    # when: ACCOUNTDISABLE in the directory, then the sync (the management command)
    directory.set_attr("alice", "userAccountControl", "514")
    call_command("directory_sync", "--no-progress")
    # then
    alice.refresh_from_db()
    agent.refresh_from_db()
    assert not alice.is_active and alice.directory_deactivated_at is not None
    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401
    assert client.get("/api/me").status_code == 401  # the session ended
    assert not agent.enabled
    event = AuditEvent.objects.get(action="user_deactivated")
    assert (event.actor, event.details["reason"], event.details["via"]) == (
        "directory_sync",
        "directory_disabled",
        "sync",
    )
    # and when they return: active again, the agent stays off until they switch it on
    directory.set_attr("alice", "userAccountControl", "512")
    assert directory_sync().reactivated == 1
    alice.refresh_from_db()
    agent.refresh_from_db()
    assert alice.is_active and alice.directory_deactivated_at is None and not agent.enabled
    assert AuditEvent.objects.filter(action="user_reactivated", target=f"user:{alice.pk}").exists()


def test_an_account_gone_from_the_directory_is_deactivated_by_the_sync(directory):
    sign_in("carol")
    directory.delete_user("carol")
    assert directory_sync().deactivated == 1
    carol = User.objects.get(username="carol")
    assert not carol.is_active
    assert AuditEvent.objects.get(action="user_deactivated").details["reason"] == "directory_not_found"
    assert AuditEvent.objects.filter(action="directory_sync_finished").exists()


def test_an_account_an_administrator_switched_off_stays_off_after_the_sync(directory):
    sign_in("carol")
    carol = User.objects.get(username="carol")
    user_active_set(user=carol, active=False, actor="admin", reason="left the project")
    directory_sync()
    carol.refresh_from_db()
    assert not carol.is_active
    assert sign_in("carol")[1] == 200  # and cannot sign in through the directory either


def test_a_disabled_directory_account_cannot_sign_in_and_is_deactivated(directory):
    sign_in("carol")
    directory.set_attr("carol", "userAccountControl", "514")
    # when
    client, status = sign_in("carol")
    # then
    assert status == 200 and "_auth_user_id" not in client.session
    assert not User.objects.get(username="carol").is_active
    assert sign_in("bob")[1] == 200  # disabled from the start: never created
    assert not User.objects.filter(username="bob").exists()


def test_a_wrong_directory_password_is_a_form_error_and_counts_towards_the_lockout(directory, settings):
    answers = [sign_in("alice", f"wrong-{i}")[1] for i in range(settings.AXES_FAILURE_LIMIT + 1)]
    assert answers[: settings.AXES_FAILURE_LIMIT - 1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)
    assert answers[-1] == 429
    assert AccessAttempt.objects.get(username="alice").failures_since_start >= settings.AXES_FAILURE_LIMIT
    assert sign_in("alice")[1] == 429  # locked out even with the right password
    assert AuditEvent.objects.filter(action="signin_failed", target="user:alice").count() >= settings.AXES_FAILURE_LIMIT


def test_a_local_account_of_the_same_name_is_not_taken_over_by_the_directory(directory, user_factory):
    local = user_factory(username="carol")
    local.set_password("carol-local-pass")
    local.save()
    assert sign_in("carol")[1] == 200  # the directory's password does not open the local account
    client, status = sign_in("carol", "carol-local-pass")
    assert status == 302
    local.refresh_from_db()
    assert local.source == "local" and not local.groups.exists()
    assert AuditEvent.objects.filter(action="signin").latest("id").details["method"] == "local"


def test_local_signin_staff_limits_local_passwords_to_staff(directory, settings, user_factory):
    settings.LOCAL_SIGNIN = "staff"
    for name, staff in (("worker", False), ("breakglass", True)):
        user = user_factory(username=name, is_staff=staff)
        user.set_password("local-pass-123")
        user.save()
    assert sign_in("worker", "local-pass-123")[1] == 200
    assert sign_in("breakglass", "local-pass-123")[1] == 302
    assert sign_in("alice")[1] == 302  # the directory is not affected


def test_starttls_without_the_directory_ca_refuses_to_sign_in(directory, settings):
    configure(settings, directory.env(LDAP_CA_FILE=""))
    assert sign_in("alice")[1] == 200
    assert not User.objects.filter(username="alice").exists()


def test_plain_ldap_without_starttls_signs_in_too(directory, settings):
    configure(settings, directory.env(LDAP_START_TLS="false", LDAP_CA_FILE=""))
    assert sign_in("alice")[1] == 302


def test_an_unreachable_directory_stops_the_sync_without_deactivating_anyone(directory, settings):
    sign_in("alice")
    configure(settings, directory.env(LDAP_SERVER_URI="ldap://127.0.0.1:9/"))
    with pytest.raises(ServiceUnavailable):
        directory_sync()
    assert User.objects.get(username="alice").is_active


def test_switching_a_directory_account_off_in_the_admin_is_audited_and_the_sync_keeps_it_off(
    directory, admin_user, client_for
):
    from tests.agents.conftest import AgentFactory

    sign_in("carol")
    carol = User.objects.get(username="carol")
    agent = AgentFactory(owner=carol, enabled=True)
    joined = carol.date_joined
    # when: the admin's change form, «Active» unticked
    answer = client_for(admin_user).post(
        f"/admin/achilles/user/{carol.pk}/change/",
        {
            "username": "carol",
            "first_name": carol.first_name,
            "last_name": carol.last_name,
            "email": carol.email,
            "date_joined_0": joined.strftime("%Y-%m-%d"),
            "date_joined_1": joined.strftime("%H:%M:%S"),
            "timezone": "",
            "source": "ldap",
        },
    )
    # then
    assert answer.status_code == 302, answer.content.decode()[:2000]
    carol.refresh_from_db()
    agent.refresh_from_db()
    assert not carol.is_active and not agent.enabled
    event = AuditEvent.objects.get(action="user_deactivated")
    assert (event.actor, event.details["via"]) == (admin_user.username, "admin")
    directory_sync()
    carol.refresh_from_db()
    assert not carol.is_active


@pytest.mark.django_db(transaction=True)
def test_a_directory_user_chats_over_the_websocket_and_deactivation_closes_it_at_once(directory):
    """The socket authenticates with the session the directory sign-in made; the sync's deactivation
    closes it without waiting for its next message."""
    import asyncio
    import json

    from asgiref.sync import async_to_sync
    from channels.testing import WebsocketCommunicator
    from django.db import connection

    from achilles.asgi import application

    client, status = sign_in("alice")
    assert status == 302
    headers = [
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
        (b"host", b"testserver"),
        (b"origin", b"http://testserver"),
    ]

    def disable_and_sync():
        try:
            directory.set_attr("alice", "userAccountControl", "514")
            directory_sync()
        finally:
            connection.close()  # this thread's connection back to the pool

    async def go():
        ws = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        connected, _ = await ws.connect()
        assert connected
        await asyncio.to_thread(disable_and_sync)
        frame = json.loads(await ws.receive_from(timeout=5))
        closed = await ws.receive_output(timeout=5)
        await ws.wait()
        return frame, closed

    frame, closed = async_to_sync(go)()
    assert frame == {"event": "error", "detail": "Your session has ended; sign in again.", "code": "not_authenticated"}
    assert closed == {"type": "websocket.close", "code": 4401}


def test_a_directory_that_does_not_answer_fails_the_sign_in_without_an_error(directory, settings):
    configure(settings, directory.env(LDAP_SERVER_URI="ldap://127.0.0.1:9/"))
    client, status = sign_in("alice")
    assert status == 200 and "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action="signin_failed", target="user:alice").exists()


def test_a_failure_while_reading_groups_leaves_no_half_made_account(directory, monkeypatch):
    import ldap
    from django_auth_ldap.config import NestedGroupOfNamesType

    def fail(self, ldap_user, group_search):
        raise ldap.SERVER_DOWN({"desc": "gone"})

    monkeypatch.setattr(NestedGroupOfNamesType, "user_groups", fail)
    assert sign_in("alice")[1] == 200
    assert not User.objects.filter(username="alice").exists()
    monkeypatch.undo()
    assert sign_in("alice")[1] == 302  # and the next sign-in makes it whole


def test_the_sync_without_a_directory_says_so(settings):
    from django.core.management.base import CommandError

    settings.LDAP_DIRECTORY = None
    with pytest.raises(CommandError, match="LDAP_SERVER_URI"):
        call_command("directory_sync", "--no-progress")


def test_one_sync_at_a_time(directory):
    import threading

    from django.db import connection

    from achilles.errors import Conflict

    held, release = threading.Event(), threading.Event()

    def hold_the_lock():
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s, %s)", (0x6463, 1))
                held.set()
                release.wait(10)
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", (0x6463, 1))
        finally:
            connection.close()

    other = threading.Thread(target=hold_the_lock)
    other.start()
    try:
        assert held.wait(10)
        with pytest.raises(Conflict):
            directory_sync()
    finally:
        release.set()
        other.join()
    assert directory_sync().checked == 0  # the lock is free again


def test_the_beat_task_runs_the_sync(directory):
    from achilles.tasks import directory_sync_task

    sign_in("carol")
    directory.delete_user("carol")
    assert directory_sync_task() == {"checked": 1, "groups_changed": 0, "deactivated": 1, "reactivated": 0, "failed": 0}


def test_an_account_provisioned_through_scim_signs_in_through_the_directory_and_stays_scim_s(directory):
    from achilles.scim.services import UserFields, scim_user_create

    # given: the identity provider made alice ahead of her first sign-in
    alice = scim_user_create(fields=UserFields(username="alice"), actor="scim:entra")
    # when
    client, status = sign_in("alice")
    # then: the same account, its directory groups mirrored, still SCIM's to switch off
    assert status == 302
    alice.refresh_from_db()
    assert alice.source == "scim" and client.get("/api/me").json()["username"] == "alice"
    assert group_principals(client) == {"group:achilles-eng", "group:achilles-all"}
    assert directory_sync().checked == 0  # the sync leaves SCIM's accounts to SCIM
