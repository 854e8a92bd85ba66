"""A Confluence page's ACL: space AND every ancestor AND the page (pure), against a brute-force rule."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from achilles.identity import EVERYONE, PUBLIC
from knowledge.connectors.confluence.permissions import NOBODY, UNREADABLE, Layer, PageAccess, page_access

pytestmark = pytest.mark.unit

USERS = {"alice": "user:1", "bob": "user:2", "carol": "user:3"}  # "mallory" has no platform account


def user_map(name: str) -> str | None:
    return USERS.get(name)


def layer(users=(), groups=(), anonymous=False) -> Layer:
    return Layer(users=frozenset(users), groups=frozenset(groups), anonymous=anonymous)


def test_unrestricted_page_is_readable_by_the_space():
    access = page_access(space=layer(groups=["staff"]), restrictions=[layer(), layer()], user_map=user_map)
    assert access == PageAccess(acl=("group:staff",), acl_also=())


def test_every_restricted_ancestor_is_a_clause_not_only_the_nearest():
    # given: the grandparent is restricted to alice and bob, the parent to the dev group
    access = page_access(
        space=layer(groups=["staff"]),
        restrictions=[layer(users=["alice", "bob"]), layer(groups=["dev"]), layer()],
        user_map=user_map,
    )
    # then: a dev who is not alice or bob is refused (Onyx's nearest-ancestor rule would grant carol)
    assert access.acl_also == (("group:dev",), ("user:1", "user:2"))
    assert not access.readable_by(frozenset({"user:3", "group:dev", "group:staff"}))
    assert access.readable_by(frozenset({"user:1", "group:dev", "group:staff"}))


def test_anonymous_space_access_is_the_public_principal():
    access = page_access(space=layer(anonymous=True), restrictions=[], user_map=user_map)
    assert access.acl == (PUBLIC,)
    assert access.readable_by(frozenset({PUBLIC}))


def test_an_unmapped_user_grants_nobody_and_an_all_unmapped_layer_closes_the_page():
    some = page_access(space=layer(users=["mallory", "alice"]), restrictions=[], user_map=user_map)
    assert some.acl == ("user:1",)
    closed = page_access(space=layer(groups=["staff"]), restrictions=[layer(users=["mallory"])], user_map=user_map)
    assert closed.is_nobody and closed.acl == (NOBODY,)
    closed_space = page_access(space=layer(users=["mallory"]), restrictions=[], user_map=user_map)
    assert closed_space.is_nobody


def test_an_unreadable_restriction_fails_closed():
    access = page_access(space=layer(anonymous=True), restrictions=[layer(), UNREADABLE], user_map=user_map)
    assert access.is_nobody
    assert not access.readable_by(frozenset({PUBLIC, EVERYONE, "user:1"}))


def test_a_space_nobody_may_view_is_readable_by_nobody():
    assert page_access(space=layer(), restrictions=[], user_map=user_map).is_nobody


# ---------------------------------------------------------------- property: against Confluence's rule

NAMES = ["alice", "bob", "carol", "mallory"]
GROUPS = ["staff", "dev", "hr"]
layers = st.builds(
    layer,
    users=st.lists(st.sampled_from(NAMES), max_size=2),
    groups=st.lists(st.sampled_from(GROUPS), max_size=2),
)


@st.composite
def trees(draw):
    n = draw(st.integers(1, 7))
    parents = [None] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    restrictions = [draw(st.one_of(st.just(layer()), layers)) for _ in range(n)]
    space = draw(
        st.builds(
            layer,
            users=st.lists(st.sampled_from(NAMES), max_size=2),
            groups=st.lists(st.sampled_from(GROUPS), max_size=2),
            anonymous=st.booleans(),
        )
    )
    return parents, restrictions, space


def confluence_can_view(reader, groups, page, parents, restrictions, space) -> bool:
    """Confluence's rule as written in its docs: the space AND each restriction on the path."""

    def passes(lay: Layer) -> bool:
        return (reader is not None and reader in lay.users) or bool(set(groups) & lay.groups)

    if not (space.anonymous or passes(space)):
        return False
    node = page
    while node is not None:
        lay = restrictions[node]
        if not lay.is_empty and not passes(lay):
            return False
        node = parents[node]
    return True


@settings(max_examples=150, deadline=None)
@given(
    tree=trees(),
    reader=st.sampled_from(["alice", "bob", "carol", None]),
    groups=st.lists(st.sampled_from(GROUPS), max_size=3),
)
def test_store_acl_matches_confluence_for_every_platform_identity(tree, reader, groups):
    parents, restrictions, space = tree
    principals = {PUBLIC, EVERYONE, *(f"group:{g}" for g in groups)}
    if reader is not None:
        principals.add(USERS[reader])
    for page in range(len(parents)):
        path, node = [], page
        while node is not None:
            path.append(restrictions[node])
            node = parents[node]
        access = page_access(space=space, restrictions=path[::-1], user_map=user_map)
        expected = confluence_can_view(reader, groups, page, parents, restrictions, space)
        assert access.readable_by(frozenset(principals)) == expected
