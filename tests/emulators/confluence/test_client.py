"""The Confluence emulator driven by the well-known client (atlassian-python-api 4.0.7, the last
release that speaks DC): spaces, pages with expansions, children, attachments, restrictions, CQL,
paging through `_links.next`, a 429 waited out through Retry-After."""

from __future__ import annotations

import datetime as dt

import pytest
from atlassian import Confluence
from atlassian.errors import ApiError

from emulators.confluence import ConfluenceStore
from tests.confluence_server import running_confluence


def _store() -> ConfluenceStore:
    s = ConfluenceStore()
    s.set_now(dt.datetime(2026, 12, 1, 10, 0))
    s.add_user("alice", email="alice@example.com", display_name="Алиса", groups=["hr"])
    s.add_user("bob", display_name="Боб")
    s.add_user("sync", groups=["confluence-administrators", "hr"])  # admins do not bypass restrictions
    s.add_token("alice-pat", "alice")
    s.add_token("bob-pat", "bob")
    s.add_token("sync-pat", "sync")
    s.add_space("KB", "База знаний", permissions={"groups": ["confluence-users"], "admins": ["sync"]})
    s.add_space("SEC", "Закрытое", permissions={"users": ["alice", "sync"]})
    root = s.add_page("KB", "Главная", "<p>Добро пожаловать</p>", author="alice")
    for n in range(7):
        s.advance(minutes=1)
        s.add_page("KB", f"Раздел {n}", f"<p>Раздел {n}</p>", parent_id=root, author="alice")
    hr = s.add_page("KB", "Кадры", "<p>Только для HR</p>", parent_id=root, author="alice")
    s.add_page("KB", "Отпуска", "<p>Порядок отпусков</p>", parent_id=hr, author="alice")
    s.set_read_restriction(hr, groups=["hr"])
    s.add_attachment(root, "readme.txt", "Привет".encode(), "text/plain", author="alice")
    s.add_page("SEC", "Секрет", "<p>s</p>", author="alice")
    return s


@pytest.fixture(scope="module")
def server():
    with running_confluence(_store()) as srv:
        yield srv


def client(server, token: str) -> Confluence:
    return Confluence(url=server.url, token=token, cloud=False, timeout=10)


def _id(server, title: str) -> str:
    return next(
        i for i, c in server.store.content.items() if c["type"] == "page" and c["versions"][-1]["title"] == title
    )


def test_spaces_pages_children_and_attachments(server):
    bob = client(server, "bob-pat")
    assert [s["key"] for s in bob.get_all_spaces()["results"]] == ["KB"]  # SEC is not bob's
    root = _id(server, "Главная")
    page = bob.get_page_by_id(root, expand="body.storage,version,ancestors,space,history,children.attachment")
    assert page["title"] == "Главная" and page["space"]["key"] == "KB"
    assert page["body"]["storage"] == {
        "value": "<p>Добро пожаловать</p>",
        "representation": "storage",
        "_expandable": {"content": f"/rest/api/content/{root}"},
    }
    assert page["version"]["number"] == 1 and page["version"]["by"]["username"] == "alice"
    assert page["version"]["when"] == "2026-12-01T10:00:00.000+03:00"
    assert page["ancestors"] == [] and page["children"]["attachment"]["size"] == 1
    # children through _get_paged: bob does not see the restricted «Кадры»
    kids = list(bob.get_page_child_by_type(root, type="page"))
    assert [k["title"] for k in kids] == [f"Раздел {n}" for n in range(7)]
    alice_kids = [k["title"] for k in client(server, "alice-pat").get_page_child_by_type(root, type="page")]
    assert alice_kids[-1] == "Кадры"
    atts = bob.get_attachments_from_content(root)["results"]
    assert [(a["title"], a["extensions"]["fileSize"]) for a in atts] == [("readme.txt", len("Привет".encode()))]
    data = bob.get(atts[0]["_links"]["download"], not_json_response=True)
    assert data.decode() == "Привет"
    child = _id(server, "Отпуска")
    deep = client(server, "alice-pat").get_page_by_id(child, expand="ancestors")
    assert [a["title"] for a in deep["ancestors"]] == ["Главная", "Кадры"]
    with pytest.raises(ApiError) as err:  # readable to alice only: a 404, as if it did not exist
        bob.get_page_by_id(child)
    assert err.value.reason.response.status_code == 404
    assert err.value.reason.response.json()["message"] == f"No content found with id: ContentId{{id={child}}}"


def test_restrictions_cql_and_paging(server):
    sync = client(server, "sync-pat")
    hr = _id(server, "Кадры")
    r = sync.get_all_restrictions_for_content(hr)
    assert [g["name"] for g in r["read"]["restrictions"]["group"]["results"]] == ["hr"]
    assert r["update"]["restrictions"]["user"]["results"] == []
    found = sync.cql("space = KB and type = page and lastmodified >= '2026/12/01 10:03' order by lastmodified asc")
    assert [x["content"]["title"] for x in found["results"]] == [
        "Раздел 2",
        "Раздел 3",
        "Раздел 4",
        "Раздел 5",
        "Раздел 6",
        "Кадры",
        "Отпуска",
    ]
    # paging: _get_paged follows DC's offset `next`
    seen = list(
        sync._get_paged(
            "rest/api/content/search",
            params={"cql": "space = KB and type = page order by id", "limit": 3, "expand": "version"},
        )
    )
    assert len(seen) == 10 and len({p["id"] for p in seen}) == 10
    log = list(server.store.requests(path=r"/content/search$"))
    assert [e["query"].get("start", "0") for e in log[-4:]] == ["0", "3", "6", "9"]
    perms = sync.get_space_permissions("KB")
    assert {p["type"] for p in perms} >= {"VIEWSPACE"}
    assert {"userName": None, "groupName": "confluence-users", "type": "VIEWSPACE"} in perms[0]["spacePermissions"]


def test_429_waited_out_through_retry_after(server):
    store = server.store
    store.faults.add({"kind": "429", "path": r"/rest/api/space$", "retry_after": "1", "times": 1})
    before = store.last_seq
    c = Confluence(
        url=server.url, token="bob-pat", cloud=False, timeout=10, retry_with_header=True, max_backoff_retries=3
    )
    assert [s["key"] for s in c.get_all_spaces()["results"]] == ["KB"]
    statuses = [e["status"] for e in store.requests(before)]
    assert statuses == [429, 200]  # one refusal, one retry after the pause: no storm
