"""Principals of a caller (PLAT-3): the ACL vocabulary shared by every app."""

from __future__ import annotations

PUBLIC = "public"
EVERYONE = "everyone"


def principals_for(user) -> list[str]:
    """``user:<id>``, ``group:<name>`` per group, ``everyone`` (and ``public``) for a signed-in user.

    Anonymous callers have only ``public``. Sorted, so equal identities compare (and cache) equal.
    """
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return [PUBLIC]
    groups = [f"group:{name}" for name in user.groups.values_list("name", flat=True)]
    return sorted({f"user:{user.pk}", EVERYONE, PUBLIC, *groups})
