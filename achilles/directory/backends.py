"""Authentication backends: local passwords (with the ``LOCAL_SIGNIN`` policy) and the directory.

Both sit behind django-axes' backend in ``AUTHENTICATION_BACKENDS``, so a lockout applies to a
directory sign-in exactly as to a local one: every failure reaches ``user_login_failed``.
The directory backend is django-auth-ldap's ``LDAPBackend`` configured from
``settings.LDAP_DIRECTORY`` (the environment) rather than ``AUTH_LDAP_*`` settings; group
mirroring is ours (``achilles.directory.services``), not the library's, so that a prefix filter,
hand-set groups and the audit trail behave as the README says.
"""

from __future__ import annotations

import logging
from typing import Any

import ldap
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.db import transaction
from django_auth_ldap.backend import LDAPBackend
from django_auth_ldap.config import LDAPSettings

from achilles.directory import services
from achilles.directory.ldapconf import auth_ldap_settings, directory_disabled

logger = logging.getLogger(__name__)


class LocalPasswordBackend(ModelBackend):
    """Django's password check, limited by ``LOCAL_SIGNIN``: ``all`` (every account with a local
    password), ``staff`` (break-glass administrators only) or ``none``."""

    def user_can_authenticate(self, user: Any) -> bool:
        if not super().user_can_authenticate(user):
            return False
        policy = getattr(settings, "LOCAL_SIGNIN", "all")
        if policy == "none":
            return False
        if policy == "staff":
            return bool(user.is_staff or user.is_superuser)
        return True


class OidcSessionBackend(ModelBackend):
    """The sessions of OpenID Connect sign-ins (``achilles.directory.oidc``): no credentials are
    checked here (the provider did that); ``get_user`` refuses a deactivated account."""

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any):
        return None


class DirectoryBackend(LDAPBackend):
    """Sign-in against the configured LDAP / AD server; the account becomes (or stays) an
    ``ldap``-sourced user whose mirrored groups and active state follow the directory."""

    settings_prefix = "ACHILLES_UNUSED_AUTH_LDAP_"  # nothing is read from Django's settings by name
    _settings: LDAPSettings | None = None

    @property
    def settings(self) -> LDAPSettings:
        if self._settings is None:
            config = settings.LDAP_DIRECTORY
            self._settings = LDAPSettings(self.settings_prefix, auth_ldap_settings(config) if config else {})
        return self._settings

    @settings.setter
    def settings(self, value: LDAPSettings) -> None:
        self._settings = value

    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any):
        if settings.LDAP_DIRECTORY is None or not username:
            return None
        # A local account of the same name is never taken over by the directory (a break-glass
        # "admin" must not become whoever the directory calls admin); an operator converts it.
        existing = self.get_user_model().objects.filter(username__iexact=username.strip()).first()
        # A SCIM-provisioned account signs in here too: the provider made it ahead of the sign-in.
        if existing is not None and existing.source not in ("ldap", "scim"):
            logger.info("directory sign-in refused for %s: a local account has that name", username)
            return None
        # django.contrib.auth instantiates the backend for every authenticate() call.
        self._account = existing
        return super().authenticate(request, username=username, password=password, **kwargs)

    def authenticate_ldap_user(self, ldap_user: Any, password: str):
        existing = getattr(self, "_account", None)
        try:
            # AD refuses the bind of a disabled account itself; a directory that only carries the flag does not.
            if ldap_user.dn is not None and directory_disabled(ldap_user.attrs):
                if existing is not None:
                    services.directory_user_deactivate(user=existing, reason="disabled", via="signin")
                return None
            # One transaction: a directory that fails while its groups are read leaves no half-made account.
            with transaction.atomic():
                user = ldap_user.authenticate(password)
                if user is None:
                    return None
                user = services.directory_user_apply(
                    user=user,
                    attrs=ldap_user.attrs,
                    group_names=list(ldap_user.group_names),
                    via="signin",
                    created=getattr(self, "_built", False),
                )
        except ldap.LDAPError as exc:  # the sign-in fails (and counts as a failure), it does not error
            logger.warning("directory sign-in failed: the directory answered %s", type(exc).__name__)
            return None
        return user if user.is_active else None

    def get_or_build_user(self, username: str, ldap_user: Any):
        user, built = super().get_or_build_user(username, ldap_user)
        if built:
            user.source = "ldap"
        self._built = built
        return user, built

    def get_user(self, user_id: Any):
        # The library's get_user ignores is_active: a session of a deactivated account must end.
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None
