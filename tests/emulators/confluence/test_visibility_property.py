"""Property: what the emulator shows each caller (CQL search, GET content, children) equals a brute-force
implementation of Confluence's view rule over random trees, restrictions, groups and space permissions:
VIEWSPACE (user, group, or anonymous on a public site) AND the page's own read restriction AND every
ancestor's; an empty restriction restricts nothing."""

from __future__ import annotations

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulators.confluence import ConfluenceStore, serve

pytestmark = [pytest.mark.unit, pytest.mark.p0]

USERS = ["u0", "u1", "u2", "u3"]
GROUPS = ["g0", "g1", "g2"]


@st.composite
def sites(draw):
    n = draw(st.integers(1, 8))
    parents = [None] + [draw(st.one_of(st.none(), st.integers(0, i - 1))) for i in range(1, n)]
    subset = lambda pool: st.sets(st.sampled_from(pool), max_size=2)  # noqa: E731
    return {
        "groups": {u: draw(subset(GROUPS)) for u in USERS},
        "space": {"users": draw(subset(USERS)), "groups": draw(subset(GROUPS)), "anonymous": draw(st.booleans())},
        "site_anonymous": draw(st.booleans()),
        "parents": parents,
        "restrictions": [
            (draw(subset(USERS)), draw(subset(GROUPS))) if draw(st.booleans()) else (set(), set()) for _ in range(n)
        ],
    }


def oracle(site, user):
    """The page indexes `user` (None = anonymous) may view, straight from the rule."""
    groups = site["groups"].get(user, set()) | ({"confluence-users"} if user else set())
    sp = site["space"]
    space_ok = (sp["anonymous"] and site["site_anonymous"]) or (
        user is not None and (user in sp["users"] or bool(groups & sp["groups"]))
    )
    out = set()
    for i in range(len(site["parents"])):
        chain, j = [], i
        while j is not None:
            chain.append(j)
            j = site["parents"][j]
        ok = space_ok
        for k in chain:
            users, grps = site["restrictions"][k]
            if users or grps:
                ok = ok and user is not None and (user in users or bool(groups & grps))
        if ok:
            out.add(i)
    return out


@pytest.fixture(scope="module")
def server():
    srv = serve(ConfluenceStore())
    srv.http = requests.Session()  # keep-alive: one connection for the whole run
    yield srv
    srv.http.close()
    srv.stop()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(site=sites())
def test_visibility_equals_the_rule(server, site):
    store = ConfluenceStore(anonymous_access=site["site_anonymous"])
    store.host_url = server.store.host_url
    for u in USERS:
        store.add_user(u, groups=site["groups"][u])
        store.add_token(f"pat-{u}", u)
    store.add_space("S", "S", permissions=site["space"])
    ids = []
    for i, parent in enumerate(site["parents"]):
        ids.append(store.add_page("S", f"p{i}", parent_id=None if parent is None else ids[parent]))
    for i, (users, groups) in enumerate(site["restrictions"]):
        store.set_read_restriction(ids[i], users=users, groups=groups)
    server.store = store
    for user in [*USERS, None]:
        headers = {"Authorization": f"Bearer pat-{user}"} if user else {}
        want = {ids[i] for i in oracle(site, user)}
        found = server.http.get(
            store.base + "/rest/api/content/search",
            params={"cql": "type = page", "limit": 100},
            headers=headers,
            timeout=10,
        ).json()
        assert {c["id"] for c in found["results"]} == want, user
        for i, page_id in enumerate(ids):
            status = server.http.get(
                store.base + f"/rest/api/content/{page_id}", headers=headers, timeout=10
            ).status_code
            assert status == (200 if page_id in want else 404), (user, i)
            if page_id in want and i in site["parents"]:  # a visible page with children
                kids = server.http.get(
                    store.base + f"/rest/api/content/{page_id}/child/page", headers=headers, timeout=10
                ).json()
                expected = {ids[j] for j, p in enumerate(site["parents"]) if p == i} & want
                assert {c["id"] for c in kids["results"]} == expected
