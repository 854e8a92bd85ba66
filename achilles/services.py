"""Writes of the platform core: API tokens, users, demo data."""

from __future__ import annotations

import functools
import json
from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from django.db import connection, models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from achilles import audit, compat, hooks
from achilles.audit import Actor
from achilles.errors import NotFound, ValidationFailed
from achilles.models import LANGUAGE_CHOICES, AllowedModel, ApiToken, User, validate_timezone
from achilles.names import name_clean
from achilles.rawsql import column, m2m_through, row_model, table
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
    """The active user owning an unrevoked token, or None.

    One statement reads the token, its user and the user's groups: the groups land in the
    user's ``groups`` prefetch cache, so the caller's identity (``principals_for``) costs no
    statement of its own. Every Bearer request and chat turn runs it; the ORM's select_related
    query alone cost ≈ 0.8 ms of CPU to compile and load, this ≈ 0.15 ms."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    sql, user_fields = _token_user_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [token_hash(raw)])
        row = cursor.fetchone()
    if row is None:
        return None
    token_id, last_used_at, groups = row[0], row[1], row[2]
    if isinstance(groups, str):  # json arrives parsed unless a text loader is registered for it
        groups = json.loads(groups)
    user = row_model(User, user_fields, row[3:])
    if not user.is_active:
        return None
    _groups_prefetched(user, groups or [])
    now = timezone.now()
    # Throttle the write: a token used in a burst updates last_used_at once a minute.
    if last_used_at is None or (now - last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token_id).update(last_used_at=now)
    return user


@functools.cache
def _token_user_sql() -> tuple[str, list[models.Field]]:
    """(SQL, the user's fields in column order); names spelled from the models' _meta (once)."""
    through = m2m_through(User, "groups")
    user_fields = list(User._meta.concrete_fields)
    columns = ", ".join(f"u.{connection.ops.quote_name(f.column)}" for f in user_fields)
    group_id, group_name = column(Group, "id"), column(Group, "name")
    sql = (
        f"SELECT t.{column(ApiToken, 'id')}, t.{column(ApiToken, 'last_used_at')},"
        f" (SELECT json_agg(json_build_array(g.{group_id}, g.{group_name}) ORDER BY g.{group_id})"
        f" FROM {table(Group)} g JOIN {table(through)} ug ON ug.{column(through, 'group')} = g.{group_id}"
        f" WHERE ug.{column(through, 'user')} = u.{column(User, 'id')}),"
        f" {columns}"
        f" FROM {table(ApiToken)} t JOIN {table(User)} u ON u.{column(User, 'id')} = t.{column(ApiToken, 'user')}"
        f" WHERE t.{column(ApiToken, 'key_hash')} = %s AND t.{column(ApiToken, 'revoked_at')} IS NULL"
    )
    return sql, user_fields


def _groups_prefetched(user: User, groups: list) -> None:
    # As prefetch_related("groups") leaves it: Django drops this cache on groups.add/remove/set/clear.
    objects = [Group.from_db(connection.alias, ["id", "name"], (gid, name)) for gid, name in groups]
    compat.prefetch_cache_fill(user, "groups", objects)


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


PROFILE_FIELDS = ("first_name", "last_name", "email", "timezone", "notify_by_email", "language")


@transaction.atomic
def user_profile_update(*, user: User, changes: dict[str, Any]) -> User:
    """The settings page's write (``PATCH /api/me``): name, e-mail, time zone, notices by e-mail, the
    interface language. A directory-sourced
    account (LDAP, OIDC) has its name and e-mail from the directory: they are read-only here (422);
    the time zone is the user's own unless the directory carries it (``LDAP_ATTR_TIMEZONE``)."""
    unknown = set(changes) - set(PROFILE_FIELDS)
    if unknown:
        raise ValidationFailed(f"cannot change {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
    owned = user.source != User.Source.LOCAL
    for field in ("first_name", "last_name", "email"):
        if field not in changes:
            continue
        if owned:
            raise ValidationFailed(
                _("%(field)s приходит из каталога (%(source)s) и меняется там")
                % {"field": field, "source": user.source},
                field=field,
                code="directory_owned",
            )
        value = (changes[field] or "").strip()
        if field == "email" and value:
            try:
                validate_email(value)
            except DjangoValidationError:
                raise ValidationFailed(_("это не адрес e-mail"), field="email", code="invalid_email") from None
        if len(value) > (254 if field == "email" else 150):
            raise ValidationFailed(_("слишком длинное значение"), field=field)
        setattr(user, field, value)
    names = [f for f in ("first_name", "last_name", "email") if f in changes]
    if "notify_by_email" in changes:
        # the person's own choice, whatever the account's source
        user.notify_by_email = bool(changes["notify_by_email"])
        names.append("notify_by_email")
    if "language" in changes:
        # the person's own choice; empty (or null): the browser's Accept-Language
        language = changes["language"] or ""
        if language and language not in {code for code, _ in LANGUAGE_CHOICES}:
            raise ValidationFailed(_("язык интерфейса — ru или en"), field="language")
        user.language = language
        names.append("language")
    if names:
        user.save(update_fields=names)
    if "timezone" in changes:
        user_timezone_set(user=user, timezone=changes["timezone"])
    return user


@transaction.atomic
def user_active_set(*, user: User, active: bool, actor: Actor, reason: str, via: str = "") -> bool:
    """Switch an account on or off; the one write path for ``is_active`` outside the admin's form.

    Off: the database switches the owner's agents off (``agents_disable_on_owner_deactivation``),
    API tokens stop authenticating and sessions end (every backend's ``get_user`` refuses an
    inactive account; open websockets are closed, ``hooks.user_deactivated``). On: agents stay off until
    their owner switches them on. Audited; returns whether anything changed."""
    # Whoever switches it clears the directory's mark; the directory sets it again after its own.
    updated = User.objects.filter(pk=user.pk, is_active=not active).update(
        is_active=active, directory_deactivated_at=None
    )
    user.is_active, user.directory_deactivated_at = active, None
    if updated and not active:
        hooks.user_deactivated.fire(hooks.UserDeactivated(user_id=user.pk, reason=reason))
    if updated:
        audit.audit_record(
            actor=actor,
            action=audit.USER_REACTIVATED if active else audit.USER_DEACTIVATED,
            target=f"user:{user.pk}",
            details={"username": user.get_username(), "reason": reason, "via": via},
        )
    return bool(updated)


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
