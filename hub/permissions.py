"""Who may use the hub: the ``hub.use_hub`` permission (the ``hub`` group in the demo data);
settings writes and publications: staff."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from django.contrib.auth.models import Group, Permission

from achilles.errors import NotAuthenticated, PermissionDenied
from achilles.models import User

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

# Who calls a hub service: a request's user or a token's (None: nobody authenticated).
HubCaller: TypeAlias = "User | AnonymousUser | None"

USE_HUB = "hub.use_hub"
HUB_GROUP = "hub"


def hub_access_check(user: HubCaller, *, staff: bool = False) -> User:
    """The caller, if it may use the hub (``staff``: and is staff); else 401/403."""
    # (an authenticated caller is always the platform's User: the isinstance only narrows the type)
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active or not isinstance(user, User):
        raise NotAuthenticated("Authentication credentials were not provided or are invalid.")
    if not user.has_perm(USE_HUB):
        raise PermissionDenied("You may not use the hub (permission hub.use_hub).")
    if staff and not user.is_staff:
        raise PermissionDenied("Only staff may do this.")
    return user


def hub_group_ensure() -> Group:
    """The ``hub`` group holding ``hub.use_hub`` (demo data, tests, the admin's starting point)."""
    group, _ = Group.objects.get_or_create(name=HUB_GROUP)
    permission = Permission.objects.get(content_type__app_label="hub", codename="use_hub")
    group.permissions.add(permission)
    return group
