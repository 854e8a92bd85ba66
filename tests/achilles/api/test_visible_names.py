"""Names through the API (issue 10, finding 12): agents, tokens and conversation titles made only of
invisible characters are a 422 and store nothing; a name with invisible edges is stored trimmed."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db

INVISIBLE = ["\u202e", "\u200b\u200b", "\ufeff", " \u00a0 ", "\u2066\u2069", "\u200d"]


def _post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json")


@pytest.fixture
def chat_model(model_factory):
    return model_factory(name="fake-default", provider="builtin", is_default=True)


@pytest.mark.parametrize("name", INVISIBLE)
def test_an_agent_named_with_invisible_characters_is_refused(client_for, user, chat_model, name):
    """Failed before the fix: 201 for names of RTL override, zero-width or BOM characters."""
    from agents.models import Agent

    client = client_for(user)
    response = _post(client, "/api/agents", {"name": name})
    assert response.status_code == 422 and response.json()["code"] == "validation_error"
    assert not Agent.objects.exists()
    agent = _post(client, "/api/agents", {"name": "ok"}).json()
    patched = client.patch(
        f"/api/agents/{agent['id']}", data=json.dumps({"name": name}), content_type="application/json"
    )
    assert patched.status_code == 422
    assert Agent.objects.get().name == "ok"


@pytest.mark.parametrize("name", INVISIBLE)
def test_a_token_named_with_invisible_characters_is_refused(client_for, user, name):
    """Failed before the fix: 201 for a token named «\u202e»."""
    from achilles.models import ApiToken

    response = _post(client_for(user), "/api/tokens", {"name": name})
    assert response.status_code == 422
    assert not ApiToken.objects.exists()


def test_names_are_stored_trimmed(client_for, user, chat_model):
    client = client_for(user)
    assert _post(client, "/api/agents", {"name": "\u200b Сводка \ufeff"}).json()["name"] == "Сводка"
    assert _post(client, "/api/tokens", {"name": "\u00a0laptop\u200b"}).json()["name"] == "laptop"


def test_a_conversation_title_needs_a_visible_character(client_for, user):
    from conversations.models import Conversation

    conversation = Conversation.objects.create(user=user, title="Старая беседа")
    client = client_for(user)
    for title in INVISIBLE:
        response = client.patch(
            f"/api/conversations/{conversation.pk}", data=json.dumps({"title": title}), content_type="application/json"
        )
        assert response.status_code == 422, title
    ok = client.patch(
        f"/api/conversations/{conversation.pk}",
        data=json.dumps({"title": " Новое\u200b"}),
        content_type="application/json",
    )
    assert ok.status_code == 200 and ok.json()["title"] == "Новое"
    conversation.refresh_from_db()
    assert conversation.title == "Новое"


def test_the_tokens_page_refuses_an_invisible_name(client_for, user):
    from achilles.models import ApiToken

    response = client_for(user).post("/tokens/", {"name": "\u200b\u202e"}, follow=True)
    assert response.status_code == 200 and "видимыми символами" in response.content.decode()
    assert not ApiToken.objects.exists()
