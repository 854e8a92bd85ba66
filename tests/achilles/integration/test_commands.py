import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from achilles.models import User

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def _run(*args) -> list[str]:
    out = io.StringIO()
    call_command("api_token", *args, stdout=out)
    return out.getvalue().strip().splitlines()


def test_api_token_creates_user_groups_and_prints_the_token_last():
    lines = _run("carol", "--create", "--staff", "--group", "finance", "--group", "it")
    token = lines[-1]
    user = User.objects.get(username="carol")
    assert user.is_staff and set(user.groups.values_list("name", flat=True)) == {"finance", "it"}
    me = Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert me["username"] == "carol" and "group:finance" in me["principals"]


def test_api_token_for_an_unknown_user_without_create_fails():
    with pytest.raises(CommandError, match="--create"):
        _run("nobody")


def test_demo_data_is_created_once():
    call_command("demo_data", stdout=io.StringIO())
    call_command("demo_data", stdout=io.StringIO())
    assert User.objects.filter(username__in=["admin", "demo"]).count() == 2
    from achilles.models import AllowedModel

    assert AllowedModel.objects.filter(kind="chat", is_default=True).count() == 1
