"""Writes that keep directory-sourced accounts in step with LDAP / Active Directory.

Sign-in (``backends.DirectoryBackend``) and the sync job (``sync.directory_sync``) meet in
``directory_user_apply``: the account is marked ``ldap``-sourced, reactivated when the directory
(not an administrator) had switched it off, its time zone taken from the directory when an
attribute is configured, and its groups set to exactly the directory groups the mirror filter
matches — nested membership included, as the group type resolves it. Groups the filter does not
match are never touched. Every change is audited, with the path (``via``) that made it.
"""

from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from achilles.audit import Actor
from achilles.directory import audit as identity_audit
from achilles.directory.config import DirectoryConfig, MirrorFilter
from achilles.errors import ValidationFailed
from achilles.models import User
from achilles.services import user_active_set, user_timezone_set

logger = logging.getLogger(__name__)

SYNC_ACTOR = "directory_sync"


def configured() -> DirectoryConfig:
    config = settings.LDAP_DIRECTORY
    if config is None:
        raise ValidationFailed("no directory is configured (LDAP_SERVER_URI is unset)", code="directory_not_configured")
    return config


def _first(attrs: Any, name: str) -> str | None:
    values = (attrs or {}).get(name) or []
    return str(values[0]).strip() if values else None


@transaction.atomic
def directory_groups_mirror(
    *,
    user: User,
    directory_groups: Iterable[str],
    mirror: MirrorFilter,
    actor: Actor,
    via: str,
    details: dict[str, Any] | None = None,
) -> tuple[list[str], list[str]]:
    """Set ``user``'s mirrored groups to the directory's; returns (added, removed). Authoritative
    for the names ``mirror`` matches only: hand-set groups outside the filter stay."""
    current = set(user.groups.values_list("name", flat=True))
    wanted = {name for name in directory_groups if name and mirror.matches(name)}
    managed = {name for name in current if mirror.matches(name)}
    added, removed = sorted(wanted - managed), sorted(managed - wanted)
    if removed:
        user.groups.remove(*Group.objects.filter(name__in=removed))
    if added:
        user.groups.add(*[Group.objects.get_or_create(name=name)[0] for name in added])
    identity_audit.record_identity_change(
        user=user, actor=actor, via=via, groups_added=added, groups_removed=removed, details=details
    )
    return added, removed


@transaction.atomic
def directory_user_apply(
    *, user: User, attrs: Any, group_names: Iterable[str], via: str, created: bool = False
) -> User:
    """Bring one account (already created or updated from the directory entry by the library) in
    step with the directory: source, reactivation, time zone, mirrored groups. ``created``: the
    library has just made the account (its first sign-in)."""
    config = configured()
    actor: Actor = user if via == "signin" else SYNC_ACTOR
    # A SCIM-provisioned account stays SCIM's: its identity provider, not the sync, switches it on and off.
    if created or user.source not in (User.Source.LDAP, User.Source.SCIM):
        User.objects.filter(pk=user.pk).update(source=User.Source.LDAP)
        user.source = User.Source.LDAP
        identity_audit.record_identity_change(user=user, actor=actor, via=via, source=User.Source.LDAP, created=created)
    if not user.is_active and user.directory_deactivated_at is not None:
        user_active_set(user=user, active=True, actor=actor, reason="directory_enabled", via=via)
        User.objects.filter(pk=user.pk).update(directory_deactivated_at=None)
        user.directory_deactivated_at = None
    if config.attr_timezone:
        zone = _first(attrs, config.attr_timezone)
        if zone and zone != user.timezone and zone in zoneinfo.available_timezones():
            user_timezone_set(user=user, timezone=zone)
    directory_groups_mirror(user=user, directory_groups=group_names, mirror=config.mirror, actor=actor, via=via)
    return user


@transaction.atomic
def directory_user_deactivate(*, user: User, reason: str, via: str) -> bool:
    """Switch off an account the directory disabled (``reason="disabled"``) or no longer has
    (``"not_found"``). Marked as the directory's doing, so that its return reactivates it; an
    account an administrator switched off stays off."""
    actor: Actor = SYNC_ACTOR if via == "sync" else "directory_signin"
    changed = user_active_set(user=user, active=False, actor=actor, reason=f"directory_{reason}", via=via)
    if changed:
        stamp = timezone.now()
        User.objects.filter(pk=user.pk).update(directory_deactivated_at=stamp)
        user.directory_deactivated_at = stamp
    return changed
