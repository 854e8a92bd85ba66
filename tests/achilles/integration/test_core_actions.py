"""Explicit core actions instead of cross-app model signals (issue 11, items 3 and 7): whichever
door a change comes through (admin, API, command), the same action runs and the dependent apps
react through ``achilles.hooks``; tokens are read-only in the admin except a revoke action; reading
the platform settings never writes."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.contrib.admin.sites import site

from achilles import hooks
from achilles.errors import ValidationFailed
from achilles.models import AllowedModel, ApiToken, PlatformSettings, User
from achilles.platform import platform_settings
from achilles.services import allowed_model_create, allowed_model_delete, api_token_create, user_timezone_set

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)  # a Monday
FRIDAY_9 = {"type": "calendar", "weekday": 4, "time": "09:00"}


@pytest.fixture
def calendar_agent(user_factory, model_factory):
    from agents.services import agent_create

    model_factory(name="chat", is_default=True)
    owner = user_factory(username="owner", timezone="Europe/Moscow")
    return agent_create(owner=owner, name="cal", schedule=FRIDAY_9, now=NOW)


def test_saving_a_user_costs_one_statement_no_hook_select(user, django_assert_num_queries):
    """The agents' pre_save signal read the old zone back on every user save (failed before: 2)."""
    user.first_name = "Алиса"
    with django_assert_num_queries(1):
        user.save()


def test_the_timezone_action_moves_calendar_slots_and_validates(calendar_agent):
    owner = calendar_agent.owner
    user_timezone_set(user=owner, timezone="Asia/Vladivostok")
    calendar_agent.refresh_from_db()
    assert calendar_agent.next_run_at.astimezone(UTC).hour == 23
    with pytest.raises(ValidationFailed) as caught:
        user_timezone_set(user=owner, timezone="Mars/Olympus")
    assert caught.value.code == "invalid_timezone" and caught.value.field == "timezone"
    assert User.objects.get(pk=owner.pk).timezone == "Asia/Vladivostok"


def test_the_user_admin_sets_the_zone_through_the_action(calendar_agent, rf, admin_user):
    owner = calendar_agent.owner
    owner_admin = site._registry[User]
    owner.timezone = "Asia/Vladivostok"
    form = SimpleNamespace(changed_data=["timezone"], initial={"timezone": "Europe/Moscow"})
    request = rf.post("/")
    request.user = admin_user
    owner_admin.save_model(request, owner, form, change=True)
    calendar_agent.refresh_from_db()
    assert User.objects.get(pk=owner.pk).timezone == "Asia/Vladivostok"
    assert calendar_agent.next_run_at.astimezone(UTC).hour == 23


def test_the_settings_admin_saves_through_the_action_and_moves_slots(user_factory, model_factory, rf):
    from agents.services import agent_create

    model_factory(name="chat", is_default=True)
    follows_org = agent_create(
        owner=user_factory(username="zoneless", timezone=None), name="org", schedule=FRIDAY_9, now=NOW
    )
    row = PlatformSettings.objects.get(id=1)
    row.timezone = "Asia/Vladivostok"
    request = rf.post("/")
    request.user = user_factory(username="root", is_staff=True, is_superuser=True)
    site._registry[PlatformSettings].save_model(request, row, SimpleNamespace(changed_data=["timezone"]), True)
    follows_org.refresh_from_db()
    assert platform_settings().timezone == "Asia/Vladivostok"
    assert follows_org.next_run_at.astimezone(UTC).hour == 23


def test_allow_list_actions_announce_the_change(db):
    seen = []
    hooks.allowed_models_changed.subscribe(seen.append)
    try:
        model = allowed_model_create(name="hash-1", provider="hash", kind="embedding", options={"dim": 384})
        allowed_model_delete(model=model)
    finally:
        hooks.allowed_models_changed._subscribers.remove(seen.append)
    assert [e.name for e in seen] == ["hash-1", "hash-1"]
    assert not AllowedModel.objects.filter(name="hash-1").exists()


def test_reading_the_settings_never_writes(db, django_assert_num_queries):
    PlatformSettings.objects.all().delete()
    with django_assert_num_queries(1):
        row = platform_settings()
    assert row.timezone == "Europe/Moscow" and not PlatformSettings.objects.exists()


def test_the_settings_row_comes_from_the_migration(db):
    assert PlatformSettings.objects.filter(id=1).exists()


def test_tokens_are_read_only_in_the_admin_but_revocable(client_for, admin_user, user):
    token, _ = api_token_create(user=user, name="laptop")
    client = client_for(admin_user)
    change = client.post(f"/admin/achilles/apitoken/{token.pk}/change/", {"user": admin_user.pk, "name": "x"})
    assert change.status_code == 403
    token.refresh_from_db()
    assert (token.user_id, token.name) == (user.pk, "laptop")
    client.post("/admin/achilles/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
