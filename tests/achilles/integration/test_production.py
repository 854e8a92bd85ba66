"""Production settings (issue 10, findings 7 and 11): transport security that `check --deploy`
accepts, a CSP the pages pass, and no start with demo accounts or demo passwords."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth.hashers import make_password

from tests.processes import child_env

PRODUCTION_ENV = {
    "ACHILLES_ENV": "production",
    "DEBUG": "false",
    "ALLOWED_HOSTS": "achilles.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://achilles.example.com",
    "SECRET_KEY": "k3y-" + "Zq8xV2mW9rT4yU7iO1pA5sD6fG0hJ3kL8zX2cV4bN7mQ9wE1rT5yU3iO6pA8sD0f",
    # production refuses to start without the key that encrypts connector credentials (knowledge.E001)
    "ACHILLES_SECRET_KEY_CONNECTORS": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
}


def _run(*args: str, **extra: str) -> subprocess.CompletedProcess:
    env = child_env(**PRODUCTION_ENV, **extra)
    env.pop("ACHILLES_TESTING", None)
    return subprocess.run(
        [sys.executable, *args], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.django_db(transaction=True)
def test_check_deploy_in_production_reports_nothing():
    """Failed before the fix: W004 (HSTS), W008 (SSL redirect), W012/W016 (cookies not Secure)…"""
    result = _run("manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.django_db(transaction=True)
def test_production_refuses_to_start_with_demo_accounts_or_passwords(user_factory):
    """Failed before the fix: `make run` created admin / achilles-admin whatever ACHILLES_ENV said,
    and nothing stopped a production start with it."""
    user_factory(username="demo")
    staff = user_factory(username="ops", is_staff=True)
    # hashed as production hashes (the suite's settings hash with MD5, which production's hashers
    # do not read)
    staff.password = make_password("achilles-admin", hasher="pbkdf2_sha256")
    staff.save()

    check = _run("manage.py", "check", "--deploy")
    assert check.returncode != 0
    assert "achilles.E001" in check.stderr and "«ops»" in check.stderr and "demo" in check.stderr
    web = _run("-c", "import achilles.asgi")
    assert web.returncode != 0 and "ACHILLES_ENV=production refuses to start" in web.stderr


def test_make_run_creates_demo_data_only_in_development():
    script = (settings.BASE_DIR / "scripts" / "run.sh").read_text()
    guarded = re.search(
        r'\nif \[ "\$\{ACHILLES_ENV:-dev\}" != "production" \]; then\n\s+"\$BIN/python" manage.py demo_data\n', script
    )
    assert guarded and script.count("demo_data") == 1


def test_the_proxy_ssl_header_is_read_from_the_environment():
    result = _run(
        "-c",
        "from django.conf import settings; import django; django.setup(); "
        "print(settings.SECURE_PROXY_SSL_HEADER, settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE,"
        " settings.SECURE_HSTS_SECONDS)",
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto: https",
        DJANGO_SETTINGS_MODULE="achilles.settings",
    )
    assert result.stdout.split() == ["('HTTP_X_FORWARDED_PROTO',", "'https')", "True", "True", "31536000"], (
        result.stderr
    )
    bad = _run(
        "-c",
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='achilles.settings'; django.setup()",
        SECURE_PROXY_SSL_HEADER="https",
    )
    assert bad.returncode == 2 and "SECURE_PROXY_SSL_HEADER" in bad.stderr


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/chat/", "/knowledge/", "/agents/", "/tokens/", "/"])
def test_pages_carry_a_csp_and_every_inline_script_has_its_nonce(client_for, user, client, path):
    """Failed before the fix: no Content-Security-Policy header at all."""
    response = (client if path == "/accounts/login/" else client_for(user)).get(path)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    script_src = policy.split("script-src")[1].split(";")[0]
    assert (
        script_src.startswith(" 'self'") and "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
    )
    assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    html = response.content.decode()
    # every script is a file of this origin, or inline with this response's nonce (the policy names it)
    nonce = re.search(r"'nonce-([^']+)'", policy)
    for attrs in re.findall(r"<script\b([^>]*)>", html):
        assert "src=" in attrs or 'type="application/json"' in attrs or (nonce and f'nonce="{nonce.group(1)}"' in attrs)
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handlers (a nonce cannot cover them)
    if path != "/accounts/login/":
        assert '<meta name="csrf-token" content="' in html


@pytest.mark.django_db
def test_cookies_are_http_only(client, user):
    from django.contrib.auth.models import User  # noqa: F401  (the default model is ours; only the flags matter)

    user.set_password("pw-0123456789")
    user.save()
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-0123456789"})
    assert response.cookies["sessionid"]["httponly"]
    page = client.get("/chat/")
    assert page.cookies.get("csrftoken") is None or page.cookies["csrftoken"]["httponly"]
    assert settings.CSRF_COOKIE_HTTPONLY and settings.SESSION_COOKIE_HTTPONLY


@pytest.mark.django_db
def test_demo_data_refuses_to_run_in_production(settings):
    from django.core.management import CommandError, call_command

    from achilles.models import User

    settings.PRODUCTION = True
    with pytest.raises(CommandError, match="not with ACHILLES_ENV=production"):
        call_command("demo_data")
    assert not User.objects.filter(username__in=["admin", "demo"]).exists()
