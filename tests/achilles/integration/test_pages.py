import pytest
from django.test import Client

from achilles.models import ApiToken

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_pages_require_sign_in():
    response = Client().get("/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_sign_in_with_the_form(user):
    client = Client()
    response = client.post("/accounts/login/", {"username": user.username, "password": "pass-word-123"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200


def test_tokens_page_creates_shows_once_and_revokes(user, client_for):
    client = client_for(user)
    page = client.post("/tokens/", {"name": "ноутбук"})
    assert page.status_code == 200
    secret = page.context["created_secret"]
    assert secret and secret in page.content.decode()
    assert secret not in client.get("/tokens/").content.decode()
    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    token = ApiToken.objects.get(user=user)
    client.post("/tokens/", {"revoke": str(token.pk)})
    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 401


def test_cannot_revoke_another_users_token(user_factory, client_for):
    owner, other = user_factory(username="t-owner"), user_factory(username="t-other")
    client_for(owner).post("/tokens/", {"name": "mine"})
    token = ApiToken.objects.get(user=owner)
    client_for(other).post("/tokens/", {"revoke": str(token.pk)})
    token.refresh_from_db()
    assert token.revoked_at is None
