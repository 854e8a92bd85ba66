"""OpenID Connect sign-in (django-allauth): accounts linked by (provider, subject), groups from a claim.

A provider's answer (the ID token's claims and the userinfo) goes through ``oidc_user_apply``:
the account is marked ``oidc``-sourced and its mirrored groups are set to the claim's, the way
the LDAP sign-in sets them. The claim is authoritative only when it is there: an *absent* claim
(the provider sent none; Entra ID's overage pointer ``_claim_names.groups`` in its place) leaves
the groups as they were and audits why, while an *empty* list removes every mirrored group.

An address from a provider never links to an existing account: a first sign-in whose e-mail
belongs to an account already here is refused (``OidcSocialAccountAdapter``), whether
the provider calls the address verified or not (a user name that is taken gets a suffix). Sign-up through allauth's own forms is closed;
only a first sign-in through a configured provider creates an account.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest
from django.shortcuts import redirect

from achilles import audit
from achilles.directory import audit as identity_audit
from achilles.directory.oidcconf import OidcProvider
from achilles.directory.services import directory_groups_mirror
from achilles.models import User

logger = logging.getLogger(__name__)

ABSENT = "claim_absent"
OVERAGE = "overage"
NOT_A_LIST = "claim_not_a_list"


def provider_config(provider_id: str) -> OidcProvider | None:
    return next((p for p in settings.OIDC_PROVIDERS if p.id == provider_id), None)


def _walk(claims: Mapping[str, Any] | None, path: str) -> tuple[bool, Any]:
    node: Any = claims or {}
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def claim_groups(sources: Iterable[Mapping[str, Any] | None], provider: OidcProvider) -> tuple[list[str] | None, str]:
    """The group names the claim carries, across the ID token and the userinfo (their union),
    mapped through ``group_names``; or (None, why) when no source carries the claim."""
    found: list[str] | None = None
    reason = ABSENT
    present_sources: list[Mapping[str, Any]] = [s for s in sources if s]
    for claims in present_sources:
        present, value = _walk(claims, provider.groups_claim)
        if not present:
            continue
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            reason = NOT_A_LIST
            continue
        found = (found or []) + [provider.group_names.get(v, v) for v in value]
    if found is not None:
        return sorted(set(found)), ""
    top = provider.groups_claim.split(".")[0]
    if any(top in (claims.get("_claim_names") or {}) for claims in present_sources):
        return None, OVERAGE
    return None, reason


@transaction.atomic
def oidc_user_apply(
    *, user: User, provider: OidcProvider, userinfo: Mapping[str, Any] | None, id_token: Mapping[str, Any] | None
) -> tuple[list[str], list[str]]:
    """Bring ``user`` in step with what ``provider`` said at this sign-in; returns (added, removed)."""
    via, extra = identity_audit.VIA_OIDC, {"provider": provider.id}
    if user.source != User.Source.OIDC:
        User.objects.filter(pk=user.pk).update(source=User.Source.OIDC)
        user.source = User.Source.OIDC
        identity_audit.record_identity_change(user=user, actor=user, via=via, source=User.Source.OIDC, details=extra)
    if not provider.groups_claim:
        return [], []
    groups, why = claim_groups([id_token, userinfo], provider)
    if groups is None:
        logger.warning("OIDC sign-in of %s via %s: groups left as they were (%s)", user.pk, provider.id, why)
        identity_audit.record_identity_change(user=user, actor=user, via=via, groups_unknown=why, details=extra)
        return [], []
    added, removed = directory_groups_mirror(
        user=user, directory_groups=groups, mirror=provider.mirror, actor=user, via=via, details=extra
    )
    return added, removed


# ------------------------------------------------------------------ allauth's adapters and signal


TAKEOVER_MESSAGE = (
    "Вход через {provider} не выполнен: учётная запись с таким адресом e-mail или именем уже есть. "
    "Адрес от провайдера не привязывает её — обратитесь к администратору."
)
INACTIVE_MESSAGE = "Вход через {provider} не выполнен: учётная запись отключена."


def _refuse(request: HttpRequest, message: str) -> ImmediateHttpResponse:
    messages.error(request, message)
    return ImmediateHttpResponse(redirect(settings.LOGIN_URL))


class NoSignupAccountAdapter(DefaultAccountAdapter):
    """allauth's local accounts: no sign-up, no e-mail flows (the product's sign-in page is the only one)."""

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return False

    def send_mail(self, template_prefix: str, email: str, context: dict[str, Any]) -> None:
        return None

    def login(self, request: HttpRequest, user: Any) -> None:
        # The session's backend is one whose get_user ends it once the account is switched off
        # and which LOCAL_SIGNIN does not concern (it is no password sign-in).
        if not hasattr(user, "backend"):
            user.backend = "achilles.directory.backends.OidcSessionBackend"
        super().login(request, user)


class OidcSocialAccountAdapter(DefaultSocialAccountAdapter):
    """First sign-ins create ``oidc`` accounts; nothing links to an existing account by address."""

    def is_open_for_signup(self, request: HttpRequest, sociallogin: Any) -> bool:
        return True

    def is_auto_signup_allowed(self, request: HttpRequest, sociallogin: Any) -> bool:
        return True  # pre_social_login has refused every conflict already

    def get_provider(self, request: HttpRequest, provider: Any, client_id: Any = None) -> Any:
        instance = super().get_provider(request, provider, client_id)
        if getattr(instance, "id", None) == "openid_connect":
            # A fresh nonce in every authorization request (providers such as Canaille require one;
            # the code flow's state and PKCE are what allauth checks).
            base = instance.get_auth_params
            instance.get_auth_params = lambda: {"nonce": secrets.token_urlsafe(24), **base()}
        return instance

    def on_authentication_error(
        self, request: HttpRequest, provider: Any, error: Any = None, exception: Any = None, extra_context: Any = None
    ) -> None:
        logger.warning(
            "OIDC sign-in via %s failed: %s %s", getattr(provider, "id", provider), error, repr(exception)[:300]
        )
        messages.error(request, f"Вход через {getattr(provider, 'name', 'провайдера')} не выполнен: ошибка провайдера.")
        raise ImmediateHttpResponse(redirect(settings.LOGIN_URL))

    def pre_social_login(self, request: HttpRequest, sociallogin: Any) -> None:
        provider = provider_config(sociallogin.account.provider)
        label = provider.name if provider else sociallogin.account.provider
        if provider is None:
            raise _refuse(request, f"Вход через {label} не настроен.")
        if sociallogin.is_existing:
            if not sociallogin.user.is_active:
                audit.audit_record(
                    actor=None,
                    action=audit.SIGNIN_FAILED,
                    target=f"user:{sociallogin.user.pk}",
                    details={"method": "oidc", "provider": provider.id, "reason": "inactive"},
                )
                raise _refuse(request, INACTIVE_MESSAGE.format(provider=label))
            return
        user = sociallogin.user
        emails = {e.email.lower() for e in sociallogin.email_addresses if e.email} | (
            {user.email.lower()} if user.email else set()
        )
        conflict = any(User.objects.filter(email__iexact=address).exists() for address in emails)
        if conflict:
            audit.audit_record(
                actor=None,
                action=audit.SIGNIN_FAILED,
                target=f"oidc:{provider.id}:{sociallogin.account.uid}"[:500],
                details={
                    "method": "oidc",
                    "provider": provider.id,
                    "reason": "account_exists",
                    "emails": sorted(emails),
                },
            )
            raise _refuse(request, TAKEOVER_MESSAGE.format(provider=label))

    def save_user(self, request: HttpRequest, sociallogin: Any, form: Any = None) -> Any:
        sociallogin.user.source = User.Source.OIDC
        user = super().save_user(request, sociallogin, form)
        provider = provider_config(sociallogin.account.provider)
        identity_audit.record_identity_change(
            user=user,
            actor=user,
            via=identity_audit.VIA_OIDC,
            source=User.Source.OIDC,
            created=True,
            details={"provider": provider.id if provider else sociallogin.account.provider},
        )
        return user


def on_social_signed_in(sender: Any, request: HttpRequest, user: User, sociallogin: Any = None, **kwargs: Any) -> None:
    """allauth's ``user_logged_in`` (new and returning accounts): the claim's groups, the audit."""
    if sociallogin is None:
        return
    provider = provider_config(sociallogin.account.provider)
    if provider is None:
        return
    data = sociallogin.account.extra_data or {}
    oidc_user_apply(user=user, provider=provider, userinfo=data.get("userinfo"), id_token=data.get("id_token"))
    audit.audit_record(
        actor=user,
        action=audit.SIGNIN,
        target=f"user:{user.pk}",
        details={"method": "oidc", "provider": provider.id, "subject": sociallogin.account.uid},
    )
