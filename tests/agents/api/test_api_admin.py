"""The admin registry: API (through the ASGI application) and Django admin; the admin lock and the
owner's switch stay separate."""

from __future__ import annotations

import pytest
from django.utils import timezone

from agents.models import Agent, AgentRun
from agents.services import agent_create

pytestmark = [pytest.mark.api, pytest.mark.django_db]


@pytest.fixture
def agents(owner, user_factory, chat_model):
    mine = agent_create(owner=owner, name="mine", schedule={"type": "interval", "every_minutes": 30})
    off = agent_create(owner=user_factory(username="bob"), name="off", enabled=False)
    return mine, off


@pytest.mark.p0
def test_admin_registry_lists_every_agent_with_owner_enabled_readonly_admin_paused_and_summary_status(
    admin_user, asgi_client, agents
):
    client = asgi_client(admin_user)
    response = client.get("/api/admin/agents")
    assert response.status_code == 200
    rows = {r["name"]: r for r in response.json()["items"]}
    assert set(rows) == {"mine", "off"}
    assert (rows["mine"]["owner"], rows["mine"]["enabled"], rows["mine"]["admin_paused"], rows["mine"]["status"]) == (
        "owner",
        True,
        False,
        "scheduled",
    )
    assert (rows["off"]["owner"], rows["off"]["enabled"], rows["off"]["status"]) == ("bob", False, "disabled")
    assert [r["name"] for r in client.get("/api/admin/agents?enabled=false").json()["items"]] == ["off"]
    # keyset pages (the one list contract; tests/achilles/api/test_list_contract.py walks it in full)
    first = client.get("/api/admin/agents?limit=1").json()
    second = client.get("/api/admin/agents", params={"limit": 1, "cursor": first["next_cursor"]}).json()
    assert [r["name"] for r in first["items"] + second["items"]] == ["mine", "off"]
    assert second["next_cursor"] is None


@pytest.mark.p0
def test_admin_sets_admin_paused_on_any_agent_without_touching_the_owner_enabled_switch(
    admin_user, asgi_client, agents
):
    mine, off = agents
    client = asgi_client(admin_user)
    for agent in (mine, off):
        body = client.post(f"/api/admin/agents/{agent.pk}/pause").json()
        assert body["admin_paused"] is True and body["status"] == "paused_by_admin"
        assert body["enabled"] == agent.enabled and body["next_run_at"] is None
    body = client.post(f"/api/admin/agents/{mine.pk}/resume").json()
    assert (body["admin_paused"], body["enabled"]) == (False, True) and body["next_run_at"] is not None
    off.refresh_from_db()
    assert (off.admin_paused, off.enabled) == (True, False)
    assert client.post("/api/admin/agents/999999/pause").status_code == 404


@pytest.mark.p0
def test_owner_setting_admin_paused_is_403_and_the_flag_is_unchanged(owner, asgi_client, agents):
    mine, _ = agents
    client = asgi_client(owner)
    for value in (True, False):
        response = client.patch(f"/api/agents/{mine.pk}", json={"admin_paused": value})
        assert response.status_code == 403 and response.json()["code"] == "admin_only"
    response = client.post("/api/agents", json={"name": "sneaky", "admin_paused": False})
    assert response.status_code == 403
    mine.refresh_from_db()
    assert mine.admin_paused is False and not Agent.objects.filter(name="sneaky").exists()


@pytest.mark.p1
def test_django_admin_registry_shows_owner_status_enabled_readonly_admin_paused_editable_with_bulk_actions(
    admin_user, client_for, agents
):
    mine, off = agents
    client = client_for(admin_user)
    page = client.get("/admin/agents/agent/")
    assert page.status_code == 200
    html = page.content.decode()
    for text in (
        "mine",
        "owner",
        "bob",
        "по расписанию",  # the status's label, in the admin's language
        "выключен",
        "pause_selected",
        "resume_selected",
        "form-0-admin_paused",
    ):
        assert text in html
    assert "form-0-enabled" not in html  # the owner's switch is read-only for the admin
    # bulk pause through the admin action
    response = client.post("/admin/agents/agent/", {"action": "pause_selected", "_selected_action": [mine.pk, off.pk]})
    assert response.status_code == 302
    assert set(Agent.objects.values_list("admin_paused", flat=True)) == {True}
    mine.refresh_from_db()
    assert mine.next_run_at is None and mine.enabled is True
    client.post("/admin/agents/agent/", {"action": "resume_selected", "_selected_action": [mine.pk]})
    mine.refresh_from_db()
    assert mine.admin_paused is False and mine.next_run_at is not None
    # the change form edits only admin_paused
    change = client.get(f"/admin/agents/agent/{mine.pk}/change/").content.decode()
    assert 'name="admin_paused"' in change and 'name="enabled"' not in change
    response = client.post(
        f"/admin/agents/agent/{mine.pk}/change/",
        {"admin_paused": "on", "runs-TOTAL_FORMS": "0", "runs-INITIAL_FORMS": "0"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    mine.refresh_from_db()
    assert mine.admin_paused is True and mine.next_run_at is None


@pytest.mark.p1
def test_admin_run_list_names_states_triggers_and_reasons_in_the_admins_language_values_unchanged(
    admin_user, client_for, agents
):
    mine, _off = agents
    run = AgentRun.objects.create(
        agent=mine, trigger="scheduled", state="failed", reason="model_error", finished_at=timezone.now()
    )
    client = client_for(admin_user)
    html = client.get("/admin/agents/agentrun/").content.decode()
    for text in ("по расписанию", "ошибка", "модель недоступна", "выполнен"):  # cells and the filter choices
        assert text in html
    for text in (">failed<", ">succeeded<", ">scheduled<", "model provider failed"):
        assert text not in html
    assert "?state__exact=failed" in html  # the filter still selects by the stored value
    english = client.get("/admin/agents/agentrun/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "the model is unavailable" in english
    run.refresh_from_db()
    assert (run.state, run.trigger, run.reason) == ("failed", "scheduled", "model_error")
