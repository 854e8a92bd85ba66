"""The audit of identity changes: one call for every path that changes who someone is here.

Sign-in through the directory (``ldap``), the directory sync (``ldap_sync``), OpenID Connect
(``oidc``) and SCIM provisioning (``scim``) all record through ``record_identity_change``: an
account's source, the groups a sync added and removed, and the events a sync could not act on
(a group claim absent from the provider's answer, an Entra ID overage). Deactivation and
reactivation are audited by ``achilles.services.user_active_set`` with the same ``via``.
``IDENTITY_ACTIONS`` is what the admin's «identity events» filter shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from achilles import audit
from achilles.audit import Actor

# The paths that change identities (``via`` in the details).
VIA_LDAP_SIGNIN = "signin"  # the LDAP sign-in (its historical name in the trail)
VIA_LDAP_SYNC = "sync"  # manage.py directory_sync / Beat
VIA_OIDC = "oidc"
VIA_SCIM = "scim"

IDENTITY_ACTIONS = (
    audit.SIGNIN,
    audit.USER_DEACTIVATED,
    audit.USER_REACTIVATED,
    audit.DIRECTORY_USER_CREATED,
    audit.DIRECTORY_GROUPS_CHANGED,
    audit.IDENTITY_SOURCE_CHANGED,
    audit.IDENTITY_GROUPS_UNKNOWN,
    audit.SCIM_USER_CREATED,
    audit.SCIM_USER_UPDATED,
    audit.SCIM_USER_DELETED,
    audit.SCIM_GROUP_CREATED,
    audit.SCIM_GROUP_UPDATED,
    audit.SCIM_GROUP_DELETED,
)


def record_identity_change(
    *,
    user: Any,
    actor: Actor,
    via: str,
    groups_added: Iterable[str] = (),
    groups_removed: Iterable[str] = (),
    source: str | None = None,
    created: bool = False,
    groups_unknown: str | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """Audit what one sync did to ``user`` (nothing is written when it did nothing).

    ``source``: the account now comes from there (``created``: the sync has just made it);
    ``groups_added`` / ``groups_removed``: the mirrored groups it changed; ``groups_unknown``:
    why the sync could not know the groups and left them as they were (``claim_absent``,
    ``overage``). ``details`` are added to every event written."""
    base = {"username": user.get_username(), "via": via, **(details or {})}
    target = f"user:{user.pk}"
    if source is not None:
        action = audit.DIRECTORY_USER_CREATED if created else audit.IDENTITY_SOURCE_CHANGED
        audit.audit_record(actor=actor, action=action, target=target, details={**base, "source": source})
    added, removed = sorted(groups_added), sorted(groups_removed)
    if added or removed:
        audit.audit_record(
            actor=actor,
            action=audit.DIRECTORY_GROUPS_CHANGED,
            target=target,
            details={**base, "added": added, "removed": removed},
        )
    if groups_unknown is not None:
        audit.audit_record(
            actor=actor,
            action=audit.IDENTITY_GROUPS_UNKNOWN,
            target=target,
            details={**base, "reason": groups_unknown},
        )
