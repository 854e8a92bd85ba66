"""Bearer authentication in one statement: the token, its user and the user's groups (issue 15:
CPU per chat turn). The user it returns must be the one the ORM loads, with the same principals."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from achilles.identity import principals_for
from achilles.models import ApiToken, User
from achilles.services import api_token_authenticate, api_token_create
from tests.achilles.factories import UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_the_user_and_groups_come_in_one_statement():
    owner = UserFactory(username="bob", groups=["hr", "legal"], first_name="Боб", timezone="Asia/Tomsk")
    token, raw = api_token_create(user=owner)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())  # inside the throttle: no write

    with CaptureQueriesContext(connection) as captured:
        user = api_token_authenticate(raw)
        principals = principals_for(user)

    assert len(captured.captured_queries) == 1, captured.captured_queries
    fresh = User.objects.get(pk=owner.pk)
    for field in User._meta.concrete_fields:
        assert getattr(user, field.attname) == getattr(fresh, field.attname), field.name
    assert principals == principals_for(fresh) == ["everyone", "group:hr", "group:legal", "public", f"user:{owner.pk}"]
    assert sorted(g.name for g in user.groups.all()) == ["hr", "legal"]


def test_a_group_change_on_the_instance_is_seen():
    owner = UserFactory(username="carol", groups=["hr"])
    _, raw = api_token_create(user=owner)
    user = api_token_authenticate(raw)

    user.groups.add(Group.objects.create(name="finance"))  # Django drops the loaded groups
    assert "group:finance" in principals_for(user)
    user.groups.clear()
    assert principals_for(user) == ["everyone", "public", f"user:{owner.pk}"]


def test_no_groups_inactive_revoked_unknown():
    owner = UserFactory(username="dave")
    token, raw = api_token_create(user=owner)
    user = api_token_authenticate(raw)
    assert user == owner and principals_for(user) == ["everyone", "public", f"user:{owner.pk}"]

    assert api_token_authenticate(raw + "x") is None
    assert api_token_authenticate("not-a-token") is None
    User.objects.filter(pk=owner.pk).update(is_active=False)
    assert api_token_authenticate(raw) is None
    User.objects.filter(pk=owner.pk).update(is_active=True)
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    assert api_token_authenticate(raw) is None


def test_last_used_is_written_at_most_once_a_minute():
    owner = UserFactory(username="erin")
    token, raw = api_token_create(user=owner)

    api_token_authenticate(raw)
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    api_token_authenticate(raw)
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    api_token_authenticate(raw)
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


def test_a_session_users_groups_are_read_by_a_plain_statement():
    owner = UserFactory(username="frank", groups=["ops"])
    fresh = User.objects.get(pk=owner.pk)

    with CaptureQueriesContext(connection) as captured:
        principals = principals_for(fresh)

    assert principals == ["everyone", "group:ops", "public", f"user:{owner.pk}"]
    assert len(captured.captured_queries) == 1
