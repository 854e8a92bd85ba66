"""Who may use the hub: the ``hub.use_hub`` permission (the ``hub`` group in the demo data);
settings writes and publications: staff."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

from achilles.errors import NotAuthenticated, PermissionDenied

USE_HUB = "hub.use_hub"
HUB_GROUP = "hub"


def hub_access_check(user, *, staff: bool = False) -> None:
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        raise NotAuthenticated("Authentication credentials were not provided or are invalid.")
    if not user.has_perm(USE_HUB):
        raise PermissionDenied("You may not use the hub (permission hub.use_hub).")
    if staff and not user.is_staff:
        raise PermissionDenied("Only staff may do this.")


def hub_group_ensure():
    """The ``hub`` group holding ``hub.use_hub`` (demo data, tests, the admin's starting point)."""
    group, _ = Group.objects.get_or_create(name=HUB_GROUP)
    permission = Permission.objects.get(content_type__app_label="hub", codename="use_hub")
    group.permissions.add(permission)
    return group
