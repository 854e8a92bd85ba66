"""Writes of the platform core: API tokens, users, demo data."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from achilles import audit
from achilles.errors import NotFound, ValidationFailed
from achilles.names import name_clean
from achilles.models import AgentModel, ApiToken, User

TOKEN_PREFIX = "ach_"


def token_hash(raw: str) -> str:
    # Tokens carry 256 bits of randomness, so a fast unsalted hash is enough at rest.
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def api_token_create(*, user: User, name: str = "token", actor=None) -> tuple[ApiToken, str]:
    """Create a token; the raw secret is returned once and never stored. Audited (``actor``
    defaults to the owner; an operator command passes its own label)."""
    try:
        name = name_clean(name or "token")[:100]
    except ValueError as exc:
        raise ValidationFailed(f"name {exc}", field="name") from exc
    secret = secrets.token_urlsafe(32)
    prefix = secrets.token_hex(4)
    raw = f"{TOKEN_PREFIX}{prefix}_{secret}"
    token = ApiToken.objects.create(user=user, name=name, prefix=prefix, key_hash=token_hash(raw))
    audit.audit_record(actor=actor if actor is not None else user, action=audit.TOKEN_CREATED,
                       target=f"token:{token.pk}", details={"owner": user.get_username(), "name": token.name,
                                                            "prefix": prefix})
    return token, raw


def api_token_authenticate(raw: str) -> User | None:
    """The active user owning an unrevoked token, or None."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = (ApiToken.objects.select_related("user")
             .filter(key_hash=token_hash(raw), revoked_at__isnull=True).first())
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    # Throttle the write: a token used in a burst updates last_used_at once a minute.
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


@transaction.atomic
def api_token_revoke(*, user: User, token_id: int) -> None:
    updated = ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
    if not updated:
        raise NotFound("token not found")
    audit.audit_record(actor=user, action=audit.TOKEN_REVOKED, target=f"token:{token_id}")


@transaction.atomic
def user_ensure(*, username: str, staff: bool = False, groups: list[str] | tuple[str, ...] = (),
                password: str | None = None, superuser: bool = False) -> tuple[User, bool]:
    """Create the user if missing; add the groups. Returns (user, created)."""
    user, created = User.objects.get_or_create(username=username, defaults={"is_staff": staff or superuser,
                                                                            "is_superuser": superuser})
    if created:
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.save()
    elif staff and not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    for name in groups:
        group, _ = Group.objects.get_or_create(name=name)
        user.groups.add(group)
    return user, created


def default_chat_model() -> AgentModel | None:
    return AgentModel.objects.filter(kind="chat", is_default=True).first()
