"""Security wiring of the platform: the production start-up guard and the sign-in audit.

``production_problems()`` lists what must not exist when ``ACHILLES_ENV=production``: the demo
account ``demo``, or any of the demo accounts or staff accounts still opening with a demo password.
The web process (``achilles.asgi``) and the Celery workers refuse to start on any of them, and
``manage.py check --deploy`` reports them as errors; other management commands still run, so an
operator can fix the accounts (``changepassword``, ``shell``).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.db.models import Q

from achilles import audit
from achilles.models import User

logger = logging.getLogger(__name__)

# The accounts `manage.py demo_data` creates in development, with their published passwords.
DEMO_ACCOUNTS: dict[str, str] = {"admin": "achilles-admin", "demo": "achilles-demo"}
DEMO_ONLY_USERNAMES = frozenset({"demo"})


def production_problems() -> list[str]:
    """What stops a production start (empty outside production or when all is well)."""
    if not getattr(settings, "PRODUCTION", False):
        return []
    problems: list[str] = []
    try:
        if User.objects.filter(username__in=DEMO_ONLY_USERNAMES).exists():
            problems.append(f"the demo account(s) {', '.join(sorted(DEMO_ONLY_USERNAMES))} exist: delete them")
        suspects = User.objects.filter(
            Q(username__in=DEMO_ACCOUNTS) | Q(is_staff=True) | Q(is_superuser=True), is_active=True
        )
        for user in suspects.only("id", "username", "password"):
            if any(user.check_password(password) for password in set(DEMO_ACCOUNTS.values())):
                problems.append(f"the account «{user.username}» has a published demo password: change it")
    except DatabaseError:  # before the first migrate there are no users to worry about
        return problems
    return problems


def production_guard() -> None:
    """Raise ``ImproperlyConfigured`` when ``production_problems()`` finds anything."""
    problems = production_problems()
    if problems:
        raise ImproperlyConfigured("ACHILLES_ENV=production refuses to start: " + "; ".join(problems))


# ------------------------------------------------------------------ sign-in audit (django-axes)


def on_signin_failed(sender, credentials, request=None, **kwargs) -> None:
    username = str((credentials or {}).get("username") or "")[:150]
    audit.audit_record(
        actor=None,
        action=audit.SIGNIN_FAILED,
        target=f"user:{username}",
        details={"ip": _client_ip(request), "path": getattr(request, "path", "")},
    )


def on_signed_in(sender, request=None, user=None, **kwargs) -> None:
    """A sign-in through a form (the login page, the admin's), with its method: ``ldap`` for the
    directory backend, ``local`` for a password. (``Client.force_login`` and other programmatic
    logins send no POST and are no one's sign-in.)"""
    if user is None or getattr(request, "method", None) != "POST":
        return
    method = "ldap" if getattr(user, "backend", "").endswith("DirectoryBackend") else "local"
    audit.audit_record(
        actor=user,
        action=audit.SIGNIN,
        target=f"user:{user.pk}",
        details={"method": method, "ip": _client_ip(request), "path": getattr(request, "path", "")},
    )


def on_signin_locked_out(sender, request=None, username=None, ip_address=None, **kwargs) -> None:
    audit.audit_record(
        actor=None,
        action=audit.SIGNIN_LOCKED_OUT,
        target=f"user:{username or ''}"[:500],
        details={"ip": ip_address, "path": getattr(request, "path", "")},
    )


def _client_ip(request) -> str | None:
    if request is None:
        return None
    return getattr(request, "axes_ip_address", None) or request.META.get("REMOTE_ADDR")
