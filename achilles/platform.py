"""One cached accessor for the platform settings singleton (PLAT-4).

The row is cached in Redis (shared by every process), so nothing keeps its own copy;
saving the row drops the cache entry after commit.
"""

from __future__ import annotations

from django.core.cache import cache
from django.db import transaction

from achilles import audit, hooks
from achilles.models import PlatformSettings

CACHE_KEY = "platform_settings:v1"
CACHE_SECONDS = 60


def platform_settings():
    cached = cache.get(CACHE_KEY)
    if cached is not None:
        return cached
    # The row comes from a data migration (0007); reading never writes. A database emptied since
    # (a flushed test database) reads the defaults.
    row = PlatformSettings.objects.filter(id=1).first() or PlatformSettings(id=1)
    cache.set(CACHE_KEY, row, CACHE_SECONDS)
    return row


def platform_settings_invalidate() -> None:
    transaction.on_commit(lambda: cache.delete(CACHE_KEY))


def platform_settings_update(*, actor="system", **fields):
    """The one write path for the settings (the admin, tests, commands); audited. A changed
    organisation time zone is announced through ``hooks.org_timezone_changed`` (agents move
    calendar slots)."""
    with transaction.atomic():
        row, _ = PlatformSettings.objects.select_for_update().get_or_create(id=1)
        before = {name: getattr(row, name) for name in fields}
        old_timezone = row.timezone
        for name, value in fields.items():
            setattr(row, name, value)
        row.full_clean()
        row.save()
        platform_settings_changed(actor=actor, changes={n: [before[n], v] for n, v in fields.items() if before[n] != v})
        if row.timezone != old_timezone:
            hooks.org_timezone_changed.fire(hooks.OrgTimezoneChanged(old=old_timezone, new=row.timezone))
        platform_settings_invalidate()
    cache.delete(CACHE_KEY)
    return row


def platform_settings_changed(*, actor, changes: dict) -> None:
    """Audit a change of the platform settings: ``changes`` maps a field to ``[before, after]``."""
    if changes:
        audit.audit_record(
            actor=actor,
            action=audit.PLATFORM_SETTINGS_CHANGED,
            target="platform_settings",
            details={"changes": changes},
        )
