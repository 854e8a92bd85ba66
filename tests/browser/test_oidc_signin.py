"""OpenID Connect sign-in through a real provider (Canaille, started by pytest-iam in this process),
driven in Chromium through the real redirects: the «Войти через …» button, the provider's own
sign-in and consent pages, back signed in with the claim's groups; then an account that is already
here cannot be taken over by a provider user who brings its e-mail address."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from achilles.models import AuditEvent, User
from tests.browser.conftest import _free_port
from tests.processes import start_daphne, stop, wait_database_idle

PROVIDER = "corp"
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def oidc_daphne(django_db_setup, iam_server, tmp_path_factory):
    """A daphne of this module's own, started with OIDC_PROVIDERS naming the provider."""
    import os

    port = _free_port()
    registered = iam_server.test_client.post(
        "/oauth/register",
        json={
            "client_name": "Achilles",
            "redirect_uris": [f"http://127.0.0.1:{port}/accounts/oidc/{PROVIDER}/login/callback/"],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_post",
            "scope": "openid profile email groups",
        },
    ).json
    providers = [
        {
            "id": PROVIDER,
            "name": "Корпоративный вход",
            "server_url": iam_server.url.rstrip("/"),
            "client_id": registered["client_id"],
            "secret": registered["client_secret"],
            "scopes": ["openid", "profile", "email", "groups"],
            "groups_claim": "groups",
            "mirror_groups": "kb-*",
        }
    ]
    before = os.environ.get("OIDC_PROVIDERS")
    os.environ["OIDC_PROVIDERS"] = json.dumps(providers)
    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"
    log = tmp_path_factory.mktemp("oidc-daphne") / "daphne.log"
    try:
        proc = start_daphne(log, port)
    finally:
        if before is None:
            os.environ.pop("OIDC_PROVIDERS", None)
        else:
            os.environ["OIDC_PROVIDERS"] = before
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code in (200, 503):
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("daphne did not start: " + log.read_text()[-2000:])
    yield url, log
    stop(proc)


@pytest.fixture
def site(oidc_daphne, transactional_db):
    yield oidc_daphne[0]
    wait_database_idle()


def provider_user(iam_server, name: str, email: str, groups: list[str]):
    user = iam_server.random_user(user_name=name, emails=[email], password=PASSWORD)
    for group_name in groups:
        iam_server.random_group(display_name=group_name, members=[user])
    return user


def sign_in_at_provider(page, site: str, login: str) -> None:
    page.goto(site + "/accounts/login/")
    page.click("text=Войти через Корпоративный вход")
    page.wait_for_url(lambda url: "127.0.0.1" not in url)  # at the provider
    page.fill("input[name=login]", login)
    page.click("button[type=submit]")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    if page.locator("button[value=accept]").count():  # the provider's consent screen
        page.click("button[value=accept]")


def test_oidc_signin_brings_the_claims_groups_and_refuses_a_takeover(page, site, iam_server, oidc_daphne):
    provider_user(iam_server, "ivanova", "ivanova@corp.example", ["kb-finance", "kb-legal", "staff-only"])
    sign_in_at_provider(page, site, "ivanova")
    page.wait_for_url(site + "/", timeout=20_000)
    me = page.evaluate("fetch('/api/me').then(r => r.json())")
    assert me["source"] == "oidc"
    assert {p for p in me["principals"] if p.startswith("group:")} == {"group:kb-finance", "group:kb-legal"}
    user = User.objects.get(socialaccount__uid="ivanova", socialaccount__provider=PROVIDER)
    assert AuditEvent.objects.filter(action="signin", target=f"user:{user.pk}", details__method="oidc").exists()

    # Someone at the provider registers the address of an account that is already here.
    User.objects.create_user("boss", email="boss@corp.example", password="x" * 16)
    page.context.clear_cookies()
    provider_user(iam_server, "mallory", "boss@corp.example", ["kb-finance"])
    sign_in_at_provider(page, site, "mallory")
    page.wait_for_url(site + "/accounts/login/", timeout=20_000)
    assert "учётная запись с таким адресом e-mail" in page.locator("p.error").inner_text()
    assert not User.objects.filter(socialaccount__uid="mallory").exists()
    assert User.objects.get(username="boss").socialaccount_set.count() == 0
