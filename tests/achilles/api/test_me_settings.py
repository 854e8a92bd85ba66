"""The settings page and ``PATCH /api/me``: name, e-mail, time zone; read-only fields of
directory-sourced accounts; 422s in the platform's error shape."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from achilles.models import User

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def patch(client: Client, body: dict):
    return client.patch("/api/me", data=json.dumps(body), content_type="application/json")


def test_local_account_changes_name_email_and_time_zone():
    user = User.objects.create_user("anna")
    client = client_for(user)
    answer = patch(client, {"first_name": " Анна ", "email": "anna@corp.example", "timezone": "Asia/Yekaterinburg"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["first_name"], body["email"], body["timezone"]) == ("Анна", "anna@corp.example", "Asia/Yekaterinburg")
    assert body["timezone_is_default"] is False and body["profile_read_only"] is False
    assert patch(client, {"timezone": None}).json()["timezone_is_default"] is True


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"timezone": "Mars/Olympus"}, "timezone", "invalid_timezone"),
        ({"email": "not-an-address"}, "email", "invalid_email"),
    ],
)
def test_bad_values_are_422_with_the_field(body, field, code):
    user = User.objects.create_user("boris", email="b@corp.example")
    answer = patch(client_for(user), body)
    assert answer.status_code == 422
    error = answer.json()
    assert error["code"] == code and error["detail"][0]["loc"][-1] == field, error
    user.refresh_from_db()
    assert user.email == "b@corp.example" and user.timezone is None


def test_directory_owns_name_and_email_of_synced_accounts():
    user = User.objects.create_user("oleg", email="oleg@corp.example", source="oidc")
    user.groups.add(Group.objects.create(name="kb-sales"))
    client = client_for(user)
    answer = patch(client, {"email": "me@evil.example"})
    assert answer.status_code == 422 and answer.json()["code"] == "directory_owned"
    assert patch(client, {"timezone": "Europe/Samara"}).status_code == 200
    me = client.get("/api/me").json()
    assert me["groups"] == ["kb-sales"] and me["profile_read_only"] is True and me["email"] == "oleg@corp.example"

    page = client.get("/settings/").content.decode()
    assert "OpenID Connect" in page and "kb-sales" in page and 'name="email" value="oleg@corp.example"' in page
    assert "readonly" in page
    # The form cannot change what the directory owns either.
    client.post("/settings/", {"email": "me@evil.example", "timezone": "Europe/Moscow"})
    user.refresh_from_db()
    assert user.email == "oleg@corp.example" and user.timezone == "Europe/Moscow"


def test_settings_form_saves_and_reports_a_bad_zone():
    user = User.objects.create_user("vera")
    client = client_for(user)
    saved = client.post("/settings/", {"first_name": "Вера", "last_name": "", "email": "", "timezone": "Europe/Riga"})
    assert saved.status_code == 302
    user.refresh_from_db()
    assert (user.first_name, user.timezone) == ("Вера", "Europe/Riga")
    bad = client.post("/settings/", {"first_name": "Вера", "timezone": "Nowhere/City"})
    assert bad.status_code == 200 and "Nowhere/City" in bad.content.decode()
    user.refresh_from_db()
    assert user.timezone == "Europe/Riga"


@pytest.mark.parametrize(
    "body", [[], "Europe/Moscow", None, {"nickname": "b"}], ids=["list", "string", "null", "unknown"]
)
def test_a_body_that_is_not_the_settings_object_is_422_and_changes_nothing(body):
    """Found by `make fuzz`: a JSON list, string or null body read as «no fields» and answered 200."""
    user = User.objects.create_user("boris", email="b@corp.example")
    answer = patch(client_for(user), body)
    assert answer.status_code == 422, answer.content
    user.refresh_from_db()
    assert user.email == "b@corp.example" and user.timezone is None
