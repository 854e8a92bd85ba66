"""Every write SCIM makes: accounts, groups, memberships and the provider's tokens.

The SCIM storage (``achilles.scim.storage``) turns a validated SCIM resource into one of these
calls; nothing else writes the SCIM tables. Switching an account off or on goes through
``achilles.services.user_active_set`` — the very function the directory sync uses — so a SCIM
deactivation has the same effects (tokens 401, sessions and websockets ended, agents switched off
by the database; a reactivation leaves the agents off). Every change is audited, through
``_audit`` only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from achilles import audit
from achilles.audit import (
    SCIM_GROUP_CREATED,
    SCIM_GROUP_DELETED,
    SCIM_GROUP_UPDATED,
    SCIM_TOKEN_CREATED,
    SCIM_TOKEN_REVOKED,
    SCIM_USER_CREATED,
    SCIM_USER_DELETED,
    SCIM_USER_UPDATED,
)
from achilles.directory.config import ConfigError, MirrorFilter
from achilles.errors import Conflict, NotFound, ValidationFailed
from achilles.models import ScimGroup, ScimToken, ScimUser, User
from achilles.names import name_clean
from achilles.services import user_active_set
from achilles.tokens import token_hash, token_mint

TOKEN_PREFIX = "scim_"


def _audit(*, actor: audit.Actor, action: str, target: str, details: dict[str, Any]) -> None:
    # The one place SCIM writes its audit trail (an identity-change recorder may replace it).
    audit.audit_record(actor=actor, action=action, target=target, details={**details, "via": "scim"})


def scim_mirror() -> MirrorFilter | None:
    """``SCIM_GROUPS``: the group names SCIM may create (exact names and ``prefix*``); unset = any
    name. A name outside it is refused; an existing group of the same name SCIM did not make is a
    409 (never taken over)."""
    raw = (os.environ.get("SCIM_GROUPS") or "").strip()
    if not raw:
        return None
    try:
        return MirrorFilter.parse(raw)
    except ConfigError as exc:
        raise ValidationFailed(str(exc).replace("LDAP_MIRROR_GROUPS", "SCIM_GROUPS"), code="scim_config") from exc


# ---------------------------------------------------------------- tokens


@transaction.atomic
def scim_token_create(*, name: str, actor: audit.Actor = "manage.py") -> tuple[ScimToken, str]:
    """A token for one identity provider; the secret is returned once and never stored."""
    try:
        name = name_clean(name)[:100]
    except ValueError as exc:
        raise ValidationFailed(f"name {exc}", field="name") from exc
    prefix, raw = token_mint(kind=TOKEN_PREFIX)
    token = ScimToken.objects.create(name=name, prefix=prefix, key_hash=token_hash(raw))
    _audit(
        actor=actor,
        action=SCIM_TOKEN_CREATED,
        target=f"scim_token:{token.pk}",
        details={"name": name, "prefix": prefix},
    )
    return token, raw


@transaction.atomic
def scim_token_revoke(*, name: str, actor: audit.Actor = "manage.py") -> int:
    tokens = list(ScimToken.objects.filter(name=name, revoked_at__isnull=True))
    if not tokens:
        raise NotFound(f"no active SCIM token named «{name}»", code="scim_token_not_found")
    ScimToken.objects.filter(pk__in=[t.pk for t in tokens]).update(revoked_at=timezone.now())
    for token in tokens:
        _audit(actor=actor, action=SCIM_TOKEN_REVOKED, target=f"scim_token:{token.pk}", details={"name": name})
    return len(tokens)


def scim_token_authenticate(raw: str) -> ScimToken | None:
    """The unrevoked token of this secret, or None."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = ScimToken.objects.filter(key_hash=token_hash(raw), revoked_at__isnull=True).first()
    if token is not None and (token.last_used_at is None or (timezone.now() - token.last_used_at).total_seconds() > 60):
        ScimToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token


# ---------------------------------------------------------------- accounts


@dataclass(frozen=True)
class UserFields:
    """What a SCIM User resource sets on the account (the rest stays in ``ScimUser.attributes``)."""

    username: str
    active: bool | None = True  # None: unassigned (removed) — the account stays as it is
    external_id: str | None = None
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)


def _uniqueness(*, username: str, external_id: str | None, exclude: int | None = None) -> None:
    others = User.objects.filter(username__iexact=username)
    if exclude is not None:
        others = others.exclude(pk=exclude)
    if others.exists():
        raise Conflict(f"the userName «{username}» is taken", code="scim_uniqueness")
    if external_id is not None:
        clash = ScimUser.objects.filter(external_id=external_id)
        if exclude is not None:
            clash = clash.exclude(pk=exclude)
        if clash.exists():
            raise Conflict("another account has this externalId", code="scim_uniqueness")


def _set_active(*, user: User, active: bool, actor: audit.Actor) -> bool:
    return user_active_set(
        user=user,
        active=active,
        actor=actor,
        reason="scim_deprovisioned" if not active else "scim_provisioned",
        via="scim",
    )


@transaction.atomic
def scim_user_create(*, fields: UserFields, actor: audit.Actor) -> User:
    """A new ``scim``-sourced account with no usable password (it signs in through the directory or
    OIDC, by the linking rules of docs/scim.md). A userName held by an account SCIM once deleted
    brings that account back (same id, documents and history)."""
    returning = (
        User.objects.select_for_update()
        .filter(username__iexact=fields.username, scim__deleted_at__isnull=False)
        .first()
    )
    if returning is not None:
        ScimUser.objects.filter(pk=returning.pk).update(deleted_at=None)
        return scim_user_update(user=returning, fields=fields, actor=actor, restored=True)
    _uniqueness(username=fields.username, external_id=fields.external_id)
    user = User(
        username=fields.username,
        first_name=fields.first_name[:150],
        last_name=fields.last_name[:150],
        email=fields.email[:254],
        is_active=fields.active is not False,
        source=User.Source.SCIM,
    )
    user.set_unusable_password()
    user.save()
    ScimUser.objects.create(user=user, external_id=fields.external_id, attributes=fields.attributes)
    _audit(
        actor=actor,
        action=SCIM_USER_CREATED,
        target=f"user:{user.pk}",
        details={"username": user.username, "external_id": fields.external_id, "active": fields.active},
    )
    return user


@transaction.atomic
def scim_user_update(*, user: User, fields: UserFields, actor: audit.Actor, restored: bool = False) -> User:
    """Bring the account to the resource the provider sent (PUT, or PATCH applied); audited with the
    fields that changed. ``active`` goes through ``user_active_set``."""
    user = User.objects.select_for_update().get(pk=user.pk)
    _uniqueness(username=fields.username, external_id=fields.external_id, exclude=user.pk)
    scim = ScimUser.objects.select_for_update().get(pk=user.pk)
    changes: dict[str, list[Any]] = {}
    for name, value in (
        ("username", fields.username),
        ("first_name", fields.first_name[:150]),
        ("last_name", fields.last_name[:150]),
        ("email", fields.email[:254]),
    ):
        if getattr(user, name) != value:
            changes[name] = [getattr(user, name), value]
            setattr(user, name, value)
    if changes:
        User.objects.filter(pk=user.pk).update(**{name: new for name, (_, new) in changes.items()})
    if scim.external_id != fields.external_id:
        changes["external_id"] = [scim.external_id, fields.external_id]
    ScimUser.objects.filter(pk=user.pk).update(
        external_id=fields.external_id, attributes=fields.attributes, updated_at=Now()
    )
    if fields.active is not None and user.is_active != fields.active:
        _set_active(user=user, active=fields.active, actor=actor)
        changes["active"] = [not fields.active, fields.active]
    if changes or restored:
        _audit(
            actor=actor,
            action=SCIM_USER_UPDATED,
            target=f"user:{user.pk}",
            details={"username": user.username, "changes": changes, "restored": restored},
        )
    return user


@transaction.atomic
def scim_user_delete(*, user: User, actor: audit.Actor) -> None:
    """DELETE: the account is switched off (as a deactivation), leaves its SCIM groups and is no
    longer shown to SCIM; the row stays, with its documents, agents and audit trail."""
    _set_active(user=user, active=False, actor=actor)
    left = list(user.groups.filter(scim__isnull=False).values_list("name", flat=True))
    user.groups.remove(*Group.objects.filter(name__in=left))
    ScimUser.objects.filter(pk=user.pk).update(deleted_at=timezone.now(), external_id=None, updated_at=Now())
    _audit(
        actor=actor,
        action=SCIM_USER_DELETED,
        target=f"user:{user.pk}",
        details={"username": user.username, "groups_left": sorted(left)},
    )


# ---------------------------------------------------------------- groups


def _group_name_allowed(name: str) -> None:
    mirror = scim_mirror()
    if mirror is not None and not mirror.matches(name):
        raise ValidationFailed(
            f"the group «{name}» is outside SCIM_GROUPS", code="scim_group_not_mirrored", field="displayName"
        )


def _members(ids: Iterable[str]) -> set[int]:
    """The SCIM-provisioned accounts ``ids`` name; an unknown id is refused (400)."""
    wanted = set()
    for raw in ids:
        try:
            wanted.add(int(raw))
        except (TypeError, ValueError):
            raise ValidationFailed(f"no SCIM user has the id {raw!r}", code="scim_unknown_member") from None
    found = set(ScimUser.objects.filter(pk__in=wanted, deleted_at__isnull=True).values_list("pk", flat=True))
    if wanted - found:
        raise ValidationFailed(f"no SCIM user has the id {sorted(wanted - found)[0]}", code="scim_unknown_member")
    return wanted


@transaction.atomic
def scim_group_create(*, name: str, external_id: str | None, member_ids: Iterable[str], actor: audit.Actor) -> Group:
    """A group SCIM manages: it becomes the ACL principal ``group:<name>``."""
    _group_name_allowed(name)
    if Group.objects.filter(name__iexact=name).exists():
        raise Conflict(f"a group named «{name}» exists", code="scim_uniqueness")
    if external_id is not None and ScimGroup.objects.filter(external_id=external_id).exists():
        raise Conflict("another group has this externalId", code="scim_uniqueness")
    members = _members(member_ids)
    group = Group.objects.create(name=name)
    ScimGroup.objects.create(group=group, external_id=external_id)
    group.user_set.add(*members)
    _audit(
        actor=actor,
        action=SCIM_GROUP_CREATED,
        target=f"group:{name}",
        details={"group_id": group.pk, "external_id": external_id, "added": sorted(members)},
    )
    return group


@transaction.atomic
def scim_group_update(
    *, group: Group, name: str, external_id: str | None, member_ids: Iterable[str], actor: audit.Actor
) -> Group:
    """Rename, re-key and set the SCIM-provisioned members of a SCIM group; members added by hand
    (accounts SCIM does not manage) stay."""
    group = Group.objects.select_for_update().get(pk=group.pk)
    scim = ScimGroup.objects.select_for_update().get(pk=group.pk)
    details: dict[str, Any] = {"group_id": group.pk}
    if name != group.name:
        _group_name_allowed(name)
        if Group.objects.filter(name__iexact=name).exclude(pk=group.pk).exists():
            raise Conflict(f"a group named «{name}» exists", code="scim_uniqueness")
        details["renamed"] = [group.name, name]
        Group.objects.filter(pk=group.pk).update(name=name)
        group.name = name
    if external_id != scim.external_id:
        if external_id is not None and ScimGroup.objects.filter(external_id=external_id).exclude(pk=group.pk).exists():
            raise Conflict("another group has this externalId", code="scim_uniqueness")
        details["external_id"] = [scim.external_id, external_id]
    ScimGroup.objects.filter(pk=group.pk).update(external_id=external_id, updated_at=Now())
    wanted = _members(member_ids)
    current = set(group.user_set.filter(scim__isnull=False, scim__deleted_at__isnull=True).values_list("pk", flat=True))
    added, removed = sorted(wanted - current), sorted(current - wanted)
    if removed:
        group.user_set.remove(*removed)
    if added:
        group.user_set.add(*added)
    if added or removed:
        details.update(added=added, removed=removed)
    if len(details) > 1:
        _audit(actor=actor, action=SCIM_GROUP_UPDATED, target=f"group:{group.name}", details=details)
    return group


@transaction.atomic
def scim_group_delete(*, group: Group, actor: audit.Actor) -> None:
    """The group and its principal go; documents shared with ``group:<name>`` are no longer reachable through it."""
    members = sorted(group.user_set.values_list("pk", flat=True))
    _audit(
        actor=actor,
        action=SCIM_GROUP_DELETED,
        target=f"group:{group.name}",
        details={"group_id": group.pk, "members": members},
    )
    group.delete()
