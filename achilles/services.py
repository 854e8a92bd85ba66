"""Writes of the platform core: API tokens, users, demo data."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.utils import timezone

from achilles import audit, hooks
from achilles.audit import Actor
from achilles.errors import NotFound, ValidationFailed
from achilles.models import AllowedModel, ApiToken, User, validate_timezone
from achilles.names import name_clean
from achilles.tokens import token_hash, token_mint

TOKEN_PREFIX = "ach_"


@transaction.atomic
def api_token_create(*, user: User, name: str = "token", actor: Actor = None) -> tuple[ApiToken, str]:
    """Create a token; the raw secret is returned once and never stored. Audited (``actor``
    defaults to the owner; an operator command passes its own label)."""
    try:
        name = name_clean(name or "token")[:100]
    except ValueError as exc:
        raise ValidationFailed(f"name {exc}", field="name") from exc
    prefix, raw = token_mint(kind=TOKEN_PREFIX)
    token = ApiToken.objects.create(user=user, name=name, prefix=prefix, key_hash=token_hash(raw))
    audit.audit_record(
        actor=actor if actor is not None else user,
        action=audit.TOKEN_CREATED,
        target=f"token:{token.pk}",
        details={"owner": user.get_username(), "name": token.name, "prefix": prefix},
    )
    return token, raw


def api_token_authenticate(raw: str) -> User | None:
    """The active user owning an unrevoked token, or None."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=token_hash(raw), revoked_at__isnull=True).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    # Throttle the write: a token used in a burst updates last_used_at once a minute.
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


@transaction.atomic
def api_token_revoke(*, user: User, token_id: int, actor: Actor = None) -> None:
    """Revoke one of ``user``'s tokens (the owner, or an admin passing ``actor``); audited."""
    updated = ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
    if not updated:
        raise NotFound("token not found")
    audit.audit_record(
        actor=actor if actor is not None else user, action=audit.TOKEN_REVOKED, target=f"token:{token_id}"
    )


@transaction.atomic
def user_ensure(
    *,
    username: str,
    staff: bool = False,
    groups: list[str] | tuple[str, ...] = (),
    password: str | None = None,
    superuser: bool = False,
) -> tuple[User, bool]:
    """Create the user if missing; add the groups. Returns (user, created)."""
    user, created = User.objects.get_or_create(
        username=username, defaults={"is_staff": staff or superuser, "is_superuser": superuser}
    )
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


@transaction.atomic
def user_timezone_set(*, user: User, timezone: str | None) -> User:
    """Set (or clear: None → the organisation's zone) a user's time zone; the one write path for
    it (admin, API). Dependent apps react through ``hooks.user_timezone_changed``."""
    timezone = (timezone or "").strip() or None
    if timezone is not None:
        try:
            validate_timezone(timezone)
        except DjangoValidationError as exc:
            raise ValidationFailed(exc.messages[0], field="timezone", code="invalid_timezone") from None
    old = User.objects.select_for_update().filter(pk=user.pk).values_list("timezone", flat=True).get()
    user.timezone = timezone
    if old != timezone:
        User.objects.filter(pk=user.pk).update(timezone=timezone)
        hooks.user_timezone_changed.fire(hooks.UserTimezoneChanged(user=user, old=old, new=timezone))
    return user


# ---------------------------------------------------------------- the model allow-list
ALLOWED_MODEL_FIELDS = ("name", "provider", "kind", "context_window", "is_default", "options")


def _allowed_models_changed(model: AllowedModel) -> None:
    hooks.allowed_models_changed.fire(hooks.AllowedModelsChanged(name=model.name, kind=model.kind))


@transaction.atomic
def allowed_model_create(*, actor: Actor = None, **fields: Any) -> AllowedModel:
    """Add a model to the allow-list (commands, fixtures); validated like the admin's form. Audited
    when an ``actor`` is named (the admin's add goes through ``allowed_model_save``); the seeding
    of a fresh installation (``demo_data``) is not a change anyone made."""
    model = AllowedModel(**fields)
    model.full_clean()
    model.save()
    if actor is not None:  # the allow-list decides what may answer and where data goes
        audit.audit_record(
            actor=actor,
            action=audit.AGENT_MODEL_CHANGED,
            target=f"agent_model:{model.name}",
            details={"created": True, "changes": {}},
        )
    _allowed_models_changed(model)
    return model


@transaction.atomic
def allowed_model_save(
    *, model: AllowedModel, actor: Actor = "system", changes: dict[str, Any] | None = None, created: bool = False
) -> AllowedModel:
    """Store an edited allow-list row (the admin's form has applied the fields); audited with
    ``changes`` (``{field: [before, after]}``)."""
    model.full_clean()
    model.save()
    audit.audit_record(
        actor=actor,
        action=audit.AGENT_MODEL_CHANGED,
        target=f"agent_model:{model.name}",
        details={"created": created, "changes": changes or {}},
    )
    _allowed_models_changed(model)
    return model


@transaction.atomic
def allowed_model_delete(*, model: AllowedModel, actor: Actor = "system") -> None:
    """Remove a model; agents using it lose it (``model_id`` NULL, by the database), no fallback."""
    audit.audit_record(
        actor=actor,
        action=audit.AGENT_MODEL_DELETED,
        target=f"agent_model:{model.name}",
        details={"provider": model.provider, "kind": model.kind},
    )
    model.delete()
    _allowed_models_changed(model)
