"""Who may read a Confluence page, as the store's all-of ACL (pure, no I/O).

Confluence's rule (CONFLUENCE.md § 2): a reader passes the space's view permission AND the view
restriction of every ancestor AND the page's own. Each layer is an any-of list of users and groups;
a layer with no users and no groups is no restriction at all (it inherits, PipesHub #1189 made such
pages visible to nobody). So the answer is the space layer as ``acl`` and one ``acl_also`` clause per
restricted page on the path — never the nearest restricted ancestor alone (Onyx's over-grant), never
the space alone for a child of a restricted page (Elastic #4095).

Fail closed: a user the platform cannot map grants nobody; a layer whose principals all fail to
map, or whose restriction could not be read, makes the page readable by nobody (``NOBODY``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from achilles.identity import PUBLIC

# A principal no identity holds: ``user:0`` (primary keys start at 1). The store refuses an empty
# ACL, so "nobody" is spelled as a list naming only it.
NOBODY = "user:0"


@dataclass(frozen=True)
class Layer:
    """One any-of permission layer: Confluence users (usernames or user keys) and group names."""

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    anonymous: bool = False

    @property
    def is_empty(self) -> bool:
        return not (self.users or self.groups or self.anonymous)


# A restriction that could not be read (an error other than 404): the page is readable by nobody.
UNREADABLE = Layer(users=frozenset({"\x00unreadable"}))

# Maps a Confluence user (username / user key) to the platform principal ``user:<id>``, or None.
UserMap = Callable[[str], str | None]
# Maps a Confluence group name to its platform principal (``group:<name>`` unless configured).
GroupMap = Callable[[str], str]


def group_principal(name: str) -> str:
    return f"group:{name}"


@dataclass(frozen=True)
class PageAccess:
    """A page's ACL in the store's terms: readable iff principals meet ``acl`` and every ``acl_also`` clause."""

    acl: tuple[str, ...]
    acl_also: tuple[tuple[str, ...], ...]

    @property
    def is_nobody(self) -> bool:
        return self.acl == (NOBODY,) or (NOBODY,) in self.acl_also

    def readable_by(self, principals: frozenset[str]) -> bool:
        return bool(principals & set(self.acl)) and all(principals & set(clause) for clause in self.acl_also)


def layer_principals(layer: Layer, user_map: UserMap, group_map: GroupMap = group_principal) -> tuple[str, ...]:
    """A layer as sorted principals; ``(NOBODY,)`` when none of them maps."""
    if layer is UNREADABLE:
        return (NOBODY,)
    principals: set[str] = {group_map(name) for name in layer.groups}
    for user in layer.users:
        mapped = user_map(user)
        if mapped is not None:
            principals.add(mapped)
    if layer.anonymous:
        principals.add(PUBLIC)
    return tuple(sorted(principals)) or (NOBODY,)


def page_access(
    *, space: Layer, restrictions: Sequence[Layer], user_map: UserMap, group_map: GroupMap = group_principal
) -> PageAccess:
    """The ACL of a page given its space's view permission and the view restrictions of its ancestors
    (root first) and itself, the page's own last. Empty restriction layers inherit (they add nothing)."""
    acl = layer_principals(space, user_map, group_map)
    clauses: list[tuple[str, ...]] = []
    for layer in restrictions:
        if layer is not UNREADABLE and layer.is_empty:
            continue
        clause = (
            layer_principals(Layer(users=layer.users, groups=layer.groups), user_map, group_map)
            if layer is not UNREADABLE
            else (NOBODY,)
        )
        if clause not in clauses:
            clauses.append(clause)
    if acl == (NOBODY,) or (NOBODY,) in clauses:
        return PageAccess(acl=(NOBODY,), acl_also=())
    return PageAccess(acl=acl, acl_also=tuple(sorted(clauses)))
