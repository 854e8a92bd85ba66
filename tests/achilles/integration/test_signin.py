"""Sign-in throttling and lockout (issue 10, finding 7): django-axes on the login page and the admin;
every failure and lockout in the audit trail."""

from __future__ import annotations

import pytest
from django.test import Client

from achilles.models import AuditEvent

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


@pytest.fixture
def member(user_factory):
    user = user_factory(username="member")
    user.set_password(PASSWORD)
    user.save()
    return user


def _login(client, path, password, username="member"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR="203.0.113.7")


@pytest.mark.p0
@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_forty_wrong_passwords_lock_the_account_out_even_for_the_right_one(member, path, settings):
    """Failed before the fix: 40 wrong passwords in 10 s, then the right one signed in."""
    member.is_staff = True  # the admin's form only signs staff in
    member.save()
    client = Client()
    answers = [_login(client, path, f"wrong-{i}").status_code for i in range(40)]
    assert answers[: settings.AXES_FAILURE_LIMIT - 1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)  # the form again
    assert set(answers[settings.AXES_FAILURE_LIMIT :]) == {429}
    right = _login(client, path, PASSWORD)
    assert right.status_code == 429
    assert "_auth_user_id" not in client.session


def test_a_lockout_is_per_username_and_address_and_a_success_resets_the_count(member, user_factory):
    other = user_factory(username="other")
    other.set_password(PASSWORD)
    other.save()
    client = Client()
    for i in range(4):
        _login(client, "/accounts/login/", f"wrong-{i}")
    assert _login(client, "/accounts/login/", PASSWORD).status_code == 302  # under the limit: signed in
    client.logout()
    for i in range(4):  # the success cleared the count: four more failures are still allowed
        assert _login(client, "/accounts/login/", f"wrong-{i}").status_code == 200
    assert _login(Client(), "/accounts/login/", PASSWORD, username="other").status_code == 302


def test_failures_and_the_lockout_are_in_the_audit_trail(member, settings):
    client = Client()
    for i in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "/accounts/login/", f"wrong-{i}")
    failed = AuditEvent.objects.filter(action="signin_failed")
    assert failed.count() == settings.AXES_FAILURE_LIMIT
    assert {(e.target, e.details["ip"], e.details["path"]) for e in failed} == {
        ("user:member", "203.0.113.7", "/accounts/login/")
    }
    assert AuditEvent.objects.filter(action="signin_locked_out", target="user:member").exists()
    assert "wrong-0" not in str(list(failed.values_list("details", flat=True)))  # never the password
