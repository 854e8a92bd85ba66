"""Who may use the hub: the ``hub.use_hub`` permission (the ``hub`` group in the demo data);
settings writes and publications: staff.

A batch belongs to the person who created it (``Batch.created_by``). Its creator reads, cancels and
retries it; other people's batches are invisible (404) unless the caller is staff or holds
``hub.view_batch`` (read) or ``hub.manage_any_batch`` (read, cancel, force-cancel, retry). Naming the
free-text ``author`` of a batch is for staff and service accounts (``hub.name_batch_author``)."""

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
VIEW_ANY_BATCH = "hub.view_batch"  # Django's default view permission of Batch (also the admin's)
MANAGE_ANY_BATCH = "hub.manage_any_batch"
NAME_BATCH_AUTHOR = "hub.name_batch_author"
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


def batches_all_visible(user: User) -> bool:
    """Whether ``user`` sees every batch, not only their own."""
    return user.is_staff or user.has_perm(VIEW_ANY_BATCH) or user.has_perm(MANAGE_ANY_BATCH)


def batch_visible(user: User, *, created_by_id: int | None) -> bool:
    return (created_by_id is not None and created_by_id == user.pk) or batches_all_visible(user)


def batch_manage_check(user: User, *, created_by_id: int | None, what: str) -> None:
    """403 unless ``user`` created the batch or may manage anyone's (call after the visibility check)."""
    if created_by_id is not None and created_by_id == user.pk:
        return
    if user.is_staff or user.has_perm(MANAGE_ANY_BATCH):
        return
    raise PermissionDenied(f"{what} belongs to someone else (permission {MANAGE_ANY_BATCH}).")


def author_name_check(user: User, *, author: str | None, default: str) -> str:
    """The batch's author: ``default`` (the surface: ``api``, ``claude``, ``admin``) unless the caller
    names one, which only staff and service accounts (``hub.name_batch_author``) may: a person's batch
    must not pass for another surface's (``claude``) or another person's."""
    if author is None or author.strip() == default:
        return default
    if user.is_staff or user.has_perm(NAME_BATCH_AUTHOR):
        return author
    raise PermissionDenied(
        f"Only staff and service accounts (permission {NAME_BATCH_AUTHOR}) may name the author; "
        f"omit «author» (it is then «{default}»)."
    )


def hub_group_ensure() -> Group:
    """The ``hub`` group holding ``hub.use_hub`` (demo data, tests, the admin's starting point)."""
    group, _ = Group.objects.get_or_create(name=HUB_GROUP)
    permission = Permission.objects.get(content_type__app_label="hub", codename="use_hub")
    group.permissions.add(permission)
    return group
