"""Interface languages: Russian by default, English by the browser's Accept-Language, and the
person's own choice (``users.language``: the settings page, ``PATCH /api/me``) over both; pages,
their scripts' catalog, the admin and the API's error texts follow it."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from achilles.models import User

pytestmark = pytest.mark.django_db


def client_for(user, **headers) -> Client:
    client = Client(**headers)
    client.force_login(user)
    return client


def patch(client: Client, body: dict):
    return client.patch("/api/me", data=json.dumps(body), content_type="application/json")


def test_pages_are_russian_by_default():
    page = client_for(User.objects.create_user("ru-default")).get("/settings/")
    text = page.content.decode()
    assert page["Content-Language"] == "ru" and '<html lang="ru">' in text
    assert "Настройки сохранены" not in text and "Язык интерфейса" in text and "Часовой пояс" in text


def test_the_browser_language_is_used_when_the_person_has_not_chosen():
    client = client_for(User.objects.create_user("browser-en"), HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")
    page = client.get("/settings/")
    text = page.content.decode()
    assert page["Content-Language"] == "en" and '<html lang="en">' in text
    assert "Interface language" in text and "Time zone" in text and "Язык интерфейса" not in text
    assert "Accept-Language" in page["Vary"]
    # a language the platform has not: the default
    page = client_for(User.objects.create_user("browser-de"), HTTP_ACCEPT_LANGUAGE="de-DE").get("/settings/")
    assert page["Content-Language"] == "ru"


def test_the_chosen_language_wins_over_the_browser():
    user = User.objects.create_user("chooser")
    client = client_for(user, HTTP_ACCEPT_LANGUAGE="ru")
    # when
    answer = patch(client, {"language": "en"})
    # then
    assert answer.status_code == 200 and answer.json()["language"] == "en"
    page = client.get("/").content.decode()
    assert "New chat" in page and "Новый чат" not in page
    # and back to the browser's
    assert patch(client, {"language": ""}).json()["language"] == ""
    assert "Новый чат" in client.get("/").content.decode()


def test_the_settings_form_switches_the_language_and_says_so_in_it():
    user = User.objects.create_user("former")
    client = client_for(user)
    saved = client.post("/settings/", {"timezone": "", "language": "en"}, follow=True)
    user.refresh_from_db()
    assert user.language == "en"
    text = saved.content.decode()
    assert "Settings saved." in text and '<option value="en" lang="en" selected>' in text


def test_an_unknown_language_is_refused():
    user = User.objects.create_user("klingon")
    client = client_for(user)
    assert patch(client, {"language": "tlh"}).status_code == 422
    client.post("/settings/", {"timezone": "", "language": "tlh"})
    user.refresh_from_db()
    assert user.language == ""
    # the database says no as well
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.filter(pk=user.pk).update(language="de")


def test_api_error_texts_follow_the_language():
    user = User.objects.create_user("err", source="oidc")
    english = patch(client_for(user, HTTP_ACCEPT_LANGUAGE="en"), {"email": "x@corp.example"}).json()
    russian = patch(client_for(user), {"email": "x@corp.example"}).json()
    assert english["code"] == russian["code"] == "directory_owned"
    assert "comes from the directory" in str(english) and "приходит из каталога" in str(russian)


def test_the_scripts_catalog_is_in_the_page_language():
    user = User.objects.create_user("js", language="en")
    catalog = client_for(user).get("/jsi18n/").content.decode()
    assert '"\\u0423\\u0432\\u0435\\u0434\\u043e\\u043c\\u043b\\u0435\\u043d\\u0438\\u044f": "Notifications"' in catalog
    russian = client_for(User.objects.create_user("js-ru")).get("/jsi18n/").content.decode()
    assert "Notifications" not in russian


def test_the_admin_speaks_the_chosen_language():
    admin = User.objects.create_superuser("root-en", language="en")
    text = client_for(admin).get("/admin/").content.decode()
    assert "Agents" in text and "Administration" in text and "Агенты" not in text
    admin.language = "ru"
    admin.save(update_fields=["language"])
    text = client_for(admin).get("/admin/").content.decode()
    assert "Агенты" in text and "Администрирование" in text
