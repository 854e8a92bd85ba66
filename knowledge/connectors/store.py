"""How connectors write into the store: through ``knowledge.facade`` like any other writer, with the
all-of ACL when the store has it; without it, a page that needs more than one list is stored
readable by nobody (fail closed) rather than under its space's wider list."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable

from knowledge import facade
from knowledge.connectors.confluence.permissions import NOBODY, PageAccess

CLOSED = PageAccess(acl=(NOBODY,), acl_also=())


@functools.cache
def all_of_supported() -> bool:
    return "acl_also" in inspect.signature(facade.upsert_record).parameters and hasattr(facade, "records_access_set")


def effective_access(access: PageAccess) -> PageAccess:
    if access.acl_also and not all_of_supported():
        return CLOSED
    return access


def record_put(
    *,
    source_system: str,
    external_id: str,
    title: str,
    text: str,
    access: PageAccess,
    url: str,
    author: str | None,
    links: Iterable[tuple[str, str]] = (),
) -> int:
    access = effective_access(access)
    extra = {"acl_also": [list(c) for c in access.acl_also]} if all_of_supported() else {}
    return facade.upsert_record(
        source_system=source_system,
        external_id=external_id,
        title=title[:500] or external_id,
        text=text,
        acl=list(access.acl),
        url=url,
        author_principal_id=author,
        links=links,
        user_writable=True,
        **extra,
    )


def records_access_put(*, source_system: str, access: dict[str, PageAccess]) -> int:
    """Re-ACL records without re-embedding; returns how many changed."""
    if not access:
        return 0
    if all_of_supported():
        mapping = {eid: (list(a.acl), [list(c) for c in a.acl_also]) for eid, a in access.items()}
        return facade.records_access_set(source_system=source_system, access=mapping)  # type: ignore[attr-defined]
    groups: dict[tuple[str, ...], list[str]] = {}
    for eid, a in access.items():
        groups.setdefault(effective_access(a).acl, []).append(eid)
    return sum(
        facade.records_acl_set(source_system=source_system, external_ids=ids, acl=list(acl))
        for acl, ids in groups.items()
    )
