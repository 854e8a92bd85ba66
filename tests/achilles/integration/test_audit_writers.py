"""Who writes the audit trail (issue 10): tokens, admin pause/resume, platform and model settings."""

from __future__ import annotations

import json

import pytest

from achilles.models import AuditEvent

pytestmark = pytest.mark.django_db


def _events(action):
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


def test_token_create_and_revoke_are_audited(client_for, user):
    client = client_for(user)
    created = client.post("/api/tokens", data=json.dumps({"name": "laptop"}), content_type="application/json")
    assert created.status_code == 201
    token_id = created.json()["id"]
    assert client.delete(f"/api/tokens/{token_id}").status_code == 204
    assert client.delete(f"/api/tokens/{token_id}").status_code == 404  # nothing revoked: nothing recorded
    [made] = _events("token_created")
    [revoked] = _events("token_revoked")
    assert (made.actor, made.target, made.details["name"]) == ("alice", f"token:{token_id}", "laptop")
    assert created.json()["token"] not in json.dumps(made.details)  # never the secret
    assert (revoked.actor, revoked.target) == ("alice", f"token:{token_id}")
    assert made.request_id and made.request_id != revoked.request_id


def test_the_operator_command_is_the_actor_of_its_tokens(user):
    from django.core.management import call_command

    call_command("api_token", "alice", stdout=open("/dev/null", "w"))  # noqa: SIM115
    [made] = _events("token_created")
    assert (made.actor, made.details["owner"]) == ("manage.py api_token", "alice")


def test_admin_pause_and_resume_are_audited(client_for, admin_user, user):
    from tests.agents.conftest import AgentFactory

    agent = AgentFactory(owner=user, name="weekly")
    client = client_for(admin_user)
    assert client.post(f"/api/admin/agents/{agent.pk}/pause").status_code == 200
    assert client.post(f"/api/admin/agents/{agent.pk}/pause").status_code == 200  # already paused: no event
    assert client.post(f"/api/admin/agents/{agent.pk}/resume").status_code == 200
    assert [(e.action, e.actor, e.target) for e in AuditEvent.objects.order_by("id")] == [
        ("agent_admin_paused", "root", f"agent:{agent.pk}"),
        ("agent_admin_resumed", "root", f"agent:{agent.pk}"),
    ]
    assert AuditEvent.objects.first().details == {"name": "weekly", "owner": "alice"}


def test_admin_bulk_pause_is_audited(client_for, admin_user, user):
    from tests.agents.conftest import AgentFactory

    agents = [AgentFactory(owner=user, name=f"a{i}") for i in range(2)]
    response = client_for(admin_user).post(
        "/admin/agents/agent/", {"action": "pause_selected", "_selected_action": [a.pk for a in agents]}
    )
    assert response.status_code == 302
    assert sorted(e.target for e in _events("agent_admin_paused")) == sorted(f"agent:{a.pk}" for a in agents)


def test_platform_settings_changes_are_audited(client_for, admin_user):
    from achilles.platform import platform_settings, platform_settings_update

    platform_settings_update(weekly_token_budget=1000)
    [event] = _events("platform_settings_changed")
    assert (event.actor, event.details) == ("system", {"changes": {"weekly_token_budget": [200000, 1000]}})
    platform_settings_update(weekly_token_budget=1000)  # no change: no event
    assert len(_events("platform_settings_changed")) == 1

    from django.forms.models import model_to_dict

    # the admin form as the page posts it: every editable field, unchecked boxes left out
    form = {
        name: value
        for name, value in model_to_dict(platform_settings()).items()
        if value is not None and value is not False and name != "id"
    }
    form["retrieval_top_k"] = 5
    response = client_for(admin_user).post("/admin/achilles/platformsettings/1/change/", form)
    assert response.status_code == 302, response.content[:2000]
    last = _events("platform_settings_changed")[-1]
    assert (last.actor, last.details) == ("root", {"changes": {"retrieval_top_k": [8, 5]}})


def test_model_allow_list_changes_are_audited(client_for, admin_user):
    from achilles.models import AllowedModel

    client = client_for(admin_user)
    response = client.post(
        "/admin/achilles/allowedmodel/add/",
        {"name": "gpt-x", "provider": "openai", "kind": "chat", "context_window": 8192, "options": "{}"},
    )
    assert response.status_code == 302, response.content[:2000]
    model = AllowedModel.objects.get(name="gpt-x")
    response = client.post(f"/admin/achilles/allowedmodel/{model.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    [changed] = _events("agent_model_changed")
    [deleted] = _events("agent_model_deleted")
    assert (changed.actor, changed.target, changed.details["created"]) == ("root", "agent_model:gpt-x", True)
    assert (deleted.actor, deleted.target) == ("root", "agent_model:gpt-x")
