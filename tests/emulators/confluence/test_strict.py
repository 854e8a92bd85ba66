"""The emulator refuses what Confluence DC refuses and answers in DC's shapes (raw HTTP)."""

from __future__ import annotations

import datetime as dt
import io
import zipfile

import pytest
import requests

from emulators.confluence import ConfluenceStore
from emulators.confluence.demo import SYNC_TOKEN, build_demo
from tests.confluence_server import running_confluence

SYNC = {"Authorization": f"Bearer {SYNC_TOKEN}"}
DEMO = {"Authorization": "Bearer demo-pat"}
ADMIN = {"Authorization": "Bearer admin-pat"}

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def demo():
    with running_confluence(build_demo()) as server:
        yield server


def _get(server, path, headers=SYNC, **params):
    return requests.get(server.url + path, headers=headers, params=params, timeout=10)


def _title_id(server, title):
    return next(
        i for i, c in server.store.content.items() if c["type"] == "page" and c["versions"][-1]["title"] == title
    )


def test_errors_in_dc_shape(demo):
    bad = _get(demo, "/rest/api/content/search", cql="type = page and")
    assert bad.status_code == 400
    assert bad.json() == {
        "statusCode": 400,
        "data": {"authorized": False, "valid": True, "errors": [], "successful": False},
        "message": "Could not parse cql : type = page and",
        "reason": "Bad Request",
    }
    for cql in (
        "typo = page",
        "type = page order by nothing",
        "lastmodified >= '01.12.2026'",
        "created > now('-1d')",
        "space ~ KB",
    ):
        assert _get(demo, "/rest/api/content/search", cql=cql).status_code == 400, cql
    assert _get(demo, "/rest/api/content/search").status_code == 400  # cql is required
    assert _get(demo, "/rest/api/content/search", cql="type=page", limit="ten").status_code == 400
    assert _get(demo, "/rest/api/content/search", cql="type=page", start="-1").status_code == 400
    assert _get(demo, "/rest/api/nothing").status_code == 404
    assert (
        requests.get(demo.store.host_url + "/rest/api/space", headers=SYNC, timeout=10).status_code == 404
    )  # no context
    assert requests.delete(demo.url + "/rest/api/content/search", headers=SYNC, timeout=10).status_code == 405
    assert (
        _get(demo, "/rest/api/content/99999999").json()["message"] == "No content found with id: ContentId{id=99999999}"
    )
    assert _get(demo, f"/rest/api/content/{_title_id(demo, 'ИТ')}", status="bogus").status_code == 400


def test_auth_bad_pat_basic_and_anonymous(demo):
    assert _get(demo, "/rest/api/space", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert _get(demo, "/rest/api/space", headers={"Authorization": "Token x"}).status_code == 401
    basic = requests.get(demo.url + "/rest/api/space", auth=("demo", "demo-confluence"), timeout=10)
    assert basic.status_code == 200 and [s["key"] for s in basic.json()["results"]] == ["KB"]
    assert requests.get(demo.url + "/rest/api/space", auth=("demo", "wrong"), timeout=10).status_code == 401
    # anonymous on a private site: nothing to see; user profiles need a login
    assert _get(demo, "/rest/api/space", headers={}).json()["results"] == []
    assert _get(demo, "/rest/api/user", headers={}, username="demo").status_code == 401
    # a public site: a bad PAT is served as anonymous, as DC does; restricted pages stay hidden
    store = ConfluenceStore(anonymous_access=True)
    store.add_user("u", groups=["hr"])
    store.add_space("PUB", "Открытое", permissions={"anonymous": True})
    open_page = store.add_page("PUB", "Открытая", "<p>1</p>")
    closed = store.add_page("PUB", "Закрытая", "<p>2</p>", parent_id=open_page)
    store.set_read_restriction(closed, groups=["hr"])
    with running_confluence(store) as pub:
        r = _get(pub, "/rest/api/content/search", headers={"Authorization": "Bearer stale"}, cql="space = PUB")
        assert r.status_code == 200 and [c["title"] for c in r.json()["results"]] == ["Открытая"]
        assert _get(pub, f"/rest/api/content/{closed}", headers={}).status_code == 404
        store.set_space_permissions("PUB", {"groups": ["hr"]})  # no longer public: anonymous sees nothing
        assert _get(pub, f"/rest/api/content/{open_page}", headers={}).status_code == 404
        store.set_space_permissions("PUB", anonymous=True)
        assert _get(pub, f"/rest/api/content/{open_page}", headers={}).status_code == 200


def test_caps_and_offset_next(demo):
    store = ConfluenceStore()
    store.add_user("u")
    store.add_token("t", "u")
    store.add_space("BIG", "Много", permissions={"users": ["u"]})
    for n in range(260):
        store.add_page("BIG", f"Страница {n}")
    h = {"Authorization": "Bearer t"}
    with running_confluence(store) as big:
        body = _get(
            big, "/rest/api/content/search", headers=h, cql="space = BIG", limit=1000, expand="body.storage"
        ).json()
        assert (body["limit"], body["size"]) == (50, 50)
        assert body["_links"]["next"].startswith("/rest/api/content/search?limit=50&start=50&")
        assert (
            _get(big, "/rest/api/content/search", headers=h, cql="space = BIG", limit=1000, expand="version").json()[
                "size"
            ]
            == 200
        )
        assert _get(big, "/rest/api/content/search", headers=h, cql="space = BIG", limit=5000).json()["size"] == 260
        last = _get(big, "/rest/api/content/search", headers=h, cql="space = BIG", limit=100, start=200).json()
        assert last["size"] == 60 and "next" not in last["_links"]
        # an unknown expansion is ignored, as DC ignores it: the property stays expandable
        odd = _get(
            big, "/rest/api/content/search", headers=h, cql="space = BIG", limit=1, expand="body.storge,nonsense"
        ).json()
        assert "storage" not in odd["results"][0]["body"] and "nonsense" not in odd["results"][0]


def test_unreadable_is_404_everywhere_and_restrictions_api(demo):
    grades = _title_id(demo, "Грейды и зарплатные вилки 2026")
    hr = _title_id(demo, "Кадры")
    home = _title_id(demo, "База знаний «Борей»")
    for path in (
        f"/rest/api/content/{grades}",
        f"/rest/api/content/{hr}/child/page",
        f"/rest/api/content/{hr}/restriction/byOperation",
    ):
        assert _get(demo, path, headers=DEMO).status_code == 404, path
    assert hr not in [
        c["id"] for c in _get(demo, f"/rest/api/content/{home}/child/page", headers=DEMO).json()["results"]
    ]
    read = _get(demo, f"/rest/api/content/{grades}/restriction/byOperation/read").json()
    assert read["restrictions"]["user"]["results"] == [] and read["restrictions"]["group"]["results"] == []  # inherits
    page = _get(
        demo,
        f"/rest/api/content/{hr}",
        expand="restrictions.read.restrictions.user,restrictions.read.restrictions.group",
    ).json()
    assert [g["name"] for g in page["restrictions"]["read"]["restrictions"]["group"]["results"]] == ["hr"]
    assert [u["username"] for u in page["restrictions"]["read"]["restrictions"]["user"]["results"]] == ["admin"]
    before = _get(demo, f"/rest/api/content/{hr}", expand="version").json()["version"]
    # demo may not change restrictions (cannot even see it); admin (named on it) may: add group it
    body = [
        {
            "operation": "read",
            "restrictions": {
                "user": [{"type": "known", "username": "admin"}],
                "group": [{"type": "group", "name": "hr"}, {"type": "group", "name": "it"}],
            },
        }
    ]
    assert (
        requests.put(demo.url + f"/rest/api/content/{hr}/restriction", json=body, headers=DEMO, timeout=10).status_code
        == 404
    )
    assert (
        requests.put(
            demo.url + f"/rest/api/content/{hr}/restriction", json={"x": 1}, headers=ADMIN, timeout=10
        ).status_code
        == 400
    )
    r = requests.put(demo.url + f"/rest/api/content/{hr}/restriction", json=body, headers=ADMIN, timeout=10)
    assert r.status_code == 200 and {g["name"] for g in r.json()["read"]["restrictions"]["group"]["results"]} == {
        "hr",
        "it",
    }
    assert _get(demo, f"/rest/api/content/{grades}", headers=DEMO).status_code == 200  # demo is in it
    after = _get(demo, f"/rest/api/content/{hr}", expand="version").json()["version"]
    assert after == before  # restriction edits are no new version, lastmodified unchanged
    assert (
        requests.delete(
            demo.url + f"/rest/api/content/{hr}/restriction/byOperation/read/group/it", headers=ADMIN, timeout=10
        ).status_code
        == 204
    )
    assert _get(demo, f"/rest/api/content/{grades}", headers=DEMO).status_code == 404


def test_space_permissions_versions_and_rpc(demo):
    perms = _get(demo, "/rest/api/space/KB/permissions", headers=ADMIN).json()
    assert {
        "operation": {"targetType": "space", "operationKey": "read"},
        "subject": {"type": "group", "name": "confluence-users"},
        "spaceKey": "KB",
        "spaceId": demo.store.spaces["KB"]["id"],
    } in perms
    assert _get(demo, "/rest/api/space/KB/permissions", headers=DEMO).status_code == 500  # CONFSERVER-99908
    assert _get(demo, "/rest/api/space/KB/permissions/anonymous", headers=ADMIN).json() == []
    rpc = {"jsonrpc": "2.0", "method": "getSpacePermissionSets", "id": 7, "params": ["KB"]}
    answer = requests.post(demo.url + "/rpc/json-rpc/confluenceservice-v2", json=rpc, headers=ADMIN, timeout=10).json()
    view = next(p for p in answer["result"] if p["type"] == "VIEWSPACE")["spacePermissions"]
    assert {"type": "VIEWSPACE", "userName": None, "groupName": "confluence-users"} in view
    assert (
        "error"
        in requests.post(demo.url + "/rpc/json-rpc/confluenceservice-v2", json=rpc, headers=DEMO, timeout=10).json()
    )
    old = ConfluenceStore(version="8.5.4")
    old.add_user("a", groups=["confluence-administrators"])
    old.add_token("t", "a")
    old.add_space("S", "S", permissions={"users": ["a"]})
    with running_confluence(old) as srv:
        assert _get(srv, "/rest/api/space/S/permissions", headers={"Authorization": "Bearer t"}).status_code == 404
        assert (
            _get(srv, "/rest/api/server-information", headers={"Authorization": "Bearer t"}).json()["version"]
            == "8.5.4"
        )
    user = _get(demo, "/rest/api/user", username="demo").json()
    assert (
        user["username"] == "demo"
        and _get(demo, "/rest/api/user", key=user["userKey"]).json()["displayName"] == user["displayName"]
    )
    assert {g["name"] for g in _get(demo, "/rest/api/user/memberof", username="demo").json()["results"]} == {
        "confluence-users",
        "it",
    }
    assert [u["username"] for u in _get(demo, "/rest/api/group/hr/member").json()["results"]] == [
        "achilles-sync",
        "kadry",
    ]
    assert _get(demo, "/rest/api/group/nope/member").status_code == 404


def test_cql_dates_minutes_zone_and_trash():
    store = ConfluenceStore()  # server zone MSK (+03:00)
    store.add_user("u")
    store.add_token("t", "u")
    store.add_space("S", "S", permissions={"users": ["u"]})
    store.set_now(dt.datetime(2026, 12, 1, 10, 5, 30))
    a = store.add_page("S", "A")
    store.set_now(dt.datetime(2026, 12, 1, 10, 7))
    b = store.add_page("S", "B", parent_id=a)
    att = store.add_attachment(b, "f.txt", b"x", "text/plain")
    h = {"Authorization": "Bearer t"}
    with running_confluence(store) as srv:

        def ids(cql):
            r = _get(srv, "/rest/api/content/search", headers=h, cql=cql)
            assert r.status_code == 200, r.text
            return [c["id"] for c in r.json()["results"]]

        assert ids("type = page and lastmodified >= '2026/12/01 10:05'") == [a, b]
        assert ids("type = page and lastmodified > '2026-12-01 10:05'") == [b]  # minute resolution
        assert ids("type = page and lastmodified < '2026-12-01 10:05'") == []
        assert ids("type = page and lastmodified = '2026-12-01'") == [a, b]
        assert ids("type = page and lastmodified >= '2026-12-01 10:06'") == [b]  # read in MSK, not UTC
        assert ids("type = page order by lastmodified desc") == [b, a]
        assert ids(f"ancestor = {a}") == [b] and ids(f"container = {b}") == [att]
        assert ids(f"(id = {a} or id = {b}) and title = 'B'") == [b]
        assert ids("space in (S, 'X') and type in (page) order by id desc") == [b, a]
        store.delete_page(b)
        assert ids("type = page") == [a] and ids(f"container = {b}") == []
        assert _get(srv, f"/rest/api/content/{b}", headers=h).status_code == 404
        assert _get(srv, f"/rest/api/content/{b}", headers=h, status="trashed").json()["status"] == "trashed"


def test_faults_drop_503_latency_and_request_log(demo):
    store = demo.store
    store.faults.add(
        {"kind": "503", "path": r"/rest/api/space$", "times": 1},
        {"kind": "drop", "path": r"/server-information", "times": 1},
    )
    assert _get(demo, "/rest/api/space").status_code == 503
    assert _get(demo, "/rest/api/space").status_code == 200
    with pytest.raises(requests.ConnectionError):
        _get(demo, "/rest/api/server-information")
    assert _get(demo, "/rest/api/server-information").status_code == 200
    store.set_rate_limit(2, fill_rate=1, interval=60)
    try:
        codes = [_get(demo, "/rest/api/space") for _ in range(3)]
        assert [r.status_code for r in codes] == [200, 200, 429]
        assert codes[2].headers["Retry-After"] and codes[2].headers["X-RateLimit-Limit"] == "2"
        assert codes[0].headers["X-RateLimit-Remaining"] == "1"
    finally:
        store.set_rate_limit(None)
    admin = requests.get(demo.store.host_url + "/_emulator/requests", params={"since": 0}, timeout=10).json()
    assert admin["requests"] and all({"method", "path", "status", "user"} <= set(e) for e in admin["requests"])


def test_demo_content_move_and_next_quirk():
    with running_confluence(build_demo()) as demo:
        bodies = {
            c["title"]: c["body"]["storage"]["value"]
            for c in _get(
                demo, "/rest/api/content/search", cql="space = KB and type = page", expand="body.storage"
            ).json()["results"]
        }
        assert 'ac:name="code"' in bodies["Подключение к VPN"] and "<![CDATA[[Interface]" in bodies["Подключение к VPN"]
        assert (
            '<ac:parameter ac:name="key">AURORA-9001</ac:parameter>' in bodies["Дежурства и инциденты"]
            and "<table>" in bodies["Дежурства и инциденты"]
        )
        assert (
            'ri:content-title="Подключение к VPN"' in bodies["База знаний «Борей»"]
            and 'ac:name="info"' in bodies["База знаний «Борей»"]
        )
        vacation = _title_id(demo, "Отпуск")
        att = _get(demo, f"/rest/api/content/{vacation}/child/attachment", headers=DEMO).json()["results"][0]
        data = requests.get(demo.url + att["_links"]["download"], headers=DEMO, timeout=10)
        assert data.status_code == 200 and data.headers["Content-Type"].endswith("wordprocessingml.document")
        with zipfile.ZipFile(io.BytesIO(data.content)) as z:
            assert "Заявление" in z.read("word/document.xml").decode()
        # a page moved under the restricted branch loses its wider readers (no new version)
        vpn = _title_id(demo, "Подключение к VPN")
        assert _get(demo, f"/rest/api/content/{vpn}", headers=DEMO).status_code == 200
        demo.store.move_page(vpn, _title_id(demo, "Кадры"))
        assert _get(demo, f"/rest/api/content/{vpn}", headers=DEMO).status_code == 404
        assert _get(demo, f"/rest/api/content/{vpn}", expand="version,ancestors").json()["version"]["number"] == 1
        # DC's `next` on a full last page, leading to an empty page
        demo.store.quirks.add("next_on_full_page")
        full = _get(demo, "/rest/api/content/search", cql="space = KB and type = page", limit=8).json()
        assert full["size"] == 8 and "next" in full["_links"]
        assert requests.get(demo.url + full["_links"]["next"], headers=SYNC, timeout=10).json()["results"] == []
