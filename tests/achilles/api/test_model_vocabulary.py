"""One selector for models from the allow-list, one error vocabulary (issue 11, item 5): an agent's
``model`` and a conversation's ``selected_model`` are refused with the same codes. Before, the
conversation said ``model_not_allowed`` for both cases agents called ``unknown_model`` and
``wrong_model_kind``."""

import json

import pytest

from conversations.models import Conversation

pytestmark = [pytest.mark.api, pytest.mark.django_db]


@pytest.mark.parametrize("name, code", [("gpt-unlisted", "unknown_model"), ("embedder", "wrong_model_kind")])
def test_agents_and_conversations_refuse_a_model_with_the_same_code(client_for, user, model_factory, name, code):
    model_factory(name="chat", is_default=True)
    model_factory(name="embedder", provider="hash", kind="embedding", options={"dim": 384})
    client = client_for(user)
    conversation = Conversation.objects.create(user=user, title="t")

    agent = client.post("/api/agents", data=json.dumps({"name": "a", "model": name}), content_type="application/json")
    thread = client.patch(
        f"/api/conversations/{conversation.pk}",
        data=json.dumps({"selected_model": name}),
        content_type="application/json",
    )

    assert agent.status_code == thread.status_code == 422
    assert agent.json()["code"] == thread.json()["code"] == code
    assert agent.json()["detail"][0]["loc"] == ["body", "model"]
    assert thread.json()["detail"][0]["loc"] == ["body", "selected_model"]
