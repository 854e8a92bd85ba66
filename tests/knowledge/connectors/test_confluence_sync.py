"""The Confluence sync against the emulator (emulators.confluence): first run, incremental with the
overlap, deletes at the source, attachments, faults waited out, a bad document recorded, and the
permission sync after a restriction change and a move — searched as the affected users."""

from __future__ import annotations

import logging

import pytest

from achilles.models import AuditEvent
from emulators.confluence import ConfluenceStore
from emulators.confluence.demo import SYNC_TOKEN, build_demo
from knowledge import facade
from knowledge.connectors.confluence.sync import connector_run_body
from knowledge.connectors.models import Connector, ConnectorRun
from knowledge.connectors.runs import run_execute
from knowledge.connectors.services import ConnectorFields, connector_create
from knowledge.models import Record
from tests.confluence_server import running_confluence

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def site():
    store = build_demo()
    with running_confluence(store) as server:
        yield server


@pytest.fixture
def people(user_factory):
    return {
        "demo": user_factory(username="demo", groups=["it"]),
        "kadry": user_factory(username="kadry", groups=["hr"]),
        "admin": user_factory(username="admin", is_staff=True, groups=["it", "finance"]),
    }


def _connector(site) -> Connector:
    return connector_create(
        actor=None,
        fields=ConnectorFields(kind="confluence", name="wiki", base_url=site.url, token=SYNC_TOKEN, spaces=["KB"]),
    )


def _run(connector: Connector, kind: str = "content") -> ConnectorRun:
    run = ConnectorRun.objects.create(connector=connector, kind=kind)
    assert run_execute(run.pk, connector_run_body) == "succeeded", ConnectorRun.objects.get(pk=run.pk).error
    return ConnectorRun.objects.get(pk=run.pk)


def _titles(user, query: str) -> set[str]:
    result = facade.search(query, facade.Identity.for_user(user), k=20)
    return {c.title for c in result.candidates}


def _ids(connector) -> set[str]:
    return set(Record.objects.filter(source_system=connector.source_system).values_list("external_id", flat=True))


def _page_id(store, title: str) -> str:
    return next(pid for pid, c in store.content.items() if c["type"] == "page" and c["versions"][-1]["title"] == title)


def test_first_sync_stores_pages_and_attachments_under_exact_acls(site, people):
    connector = _connector(site)
    run = _run(connector)
    assert run.failed == 0, list(run.errors.values_list("external_id", "error"))
    assert run.seen == 8 and run.changed == 9 and run.checkpoint["phase"] == "done"
    ids = _ids(connector)
    assert len(ids) == 9 and any("/attachment/" in i for i in ids)
    grades = Record.objects.get(source_system=connector.source_system, title="Грейды и зарплатные вилки 2026")
    # the space (confluence-users → everyone) AND the restricted parent «Кадры» (group hr, user admin)
    assert "everyone" in grades.acl and grades.acl_also == [["group:hr", f"user:{people['admin'].pk}"]]
    assert grades.url.startswith(site.url) and "/pages/viewpage.action?pageId=" in grades.url
    assert grades.author_principal_id == f"user:{people['kadry'].pk}"
    # demo (group it) reads the open pages and only gets the withheld hint for the restricted branch
    assert "Подключение к VPN" in _titles(people["demo"], "VPN клиент")
    result = facade.search("грейды зарплатные вилки", facade.Identity.for_user(people["demo"]), k=20)
    assert not {c.title for c in result.candidates} & {"Грейды и зарплатные вилки 2026", "Кадровый резерв"}
    assert "Грейды и зарплатные вилки 2026" in _titles(people["kadry"], "грейды зарплатные вилки")
    # the page tree is in the graph: the child links to its parent
    graph = facade.graph(grades.pk, facade.Identity.for_user(people["kadry"]))
    assert "Кадры" in {n.title for n in graph.nodes}


def test_incremental_run_reads_from_the_watermark_with_the_overlap_and_deletes_trashed_pages(site, people):
    store = site.store
    connector = _connector(site)
    _run(connector)
    # when a page is edited, another trashed, and a day passes
    store.advance(hours=1)
    vpn = _page_id(store, "Подключение к VPN")
    store.update_page(vpn, body="<p>Новый клиент WireGuard вместо OpenVPN.</p>", author="admin")
    store.delete_page(_page_id(store, "Дежурства и инциденты"))
    before = store.last_seq
    run = _run(connector)
    # then the CQL asks from the watermark minus the overlap, and sees only the edited page
    searches = [r for r in store.requests(before, path="content/search") if "lastmodified" in r["query"].get("cql", "")]
    assert searches and all('lastmodified >= "' in r["query"]["cql"] for r in searches)
    # (the overlap re-reads the last page of the first run too: seen, stored unchanged)
    assert 1 <= run.seen <= 2 and run.changed == 1 and run.deleted == 1
    assert "Дежурства и инциденты" not in set(
        Record.objects.filter(source_system=connector.source_system).values_list("title", flat=True)
    )
    assert "WireGuard" in Record.objects.get(source_system=connector.source_system, external_id=vpn).chunks.first().text


def test_throttling_is_waited_out_honouring_retry_after_without_a_storm(site, people, monkeypatch):
    waits = []
    monkeypatch.setattr("knowledge.connectors.confluence.client.time.sleep", waits.append)
    store = site.store
    store.faults.add(
        {"kind": "429", "path": "content/search", "retry_after": "3", "times": 2},
        {"kind": "429", "path": "content/search", "retry_after": "999999999", "times": 1},
        {"kind": "503", "path": "download/attachments", "times": 1},
    )
    connector = _connector(site)
    run = _run(connector)
    assert run.failed == 0 and len(_ids(connector)) == 9
    # Retry-After honoured (3 s), a «block all» one clamped to a minute, backoff without one
    assert waits[:2] == [3.0, 3.0] and 60.0 in waits and 1.0 in waits
    throttled = [r for r in store.request_log if r["status"] in (429, 503)]
    assert len(throttled) == 4  # each fault answered once: no retry storm


def test_one_bad_document_is_recorded_and_the_run_goes_on(site, people):
    store = site.store
    store.faults.add({"kind": "error", "status": 500, "path": r"download/attachments", "times": 0})
    connector = _connector(site)
    run = _run(connector)
    errors = list(run.errors.values_list("external_id", "error"))
    assert run.failed == 1 and len(errors) == 1 and "/attachment/" in errors[0][0] and "500" in errors[0][1]
    assert len(_ids(connector)) == 8  # every page stored, the attachment not


def test_permission_sync_after_a_restriction_change_and_after_a_move(site, people):
    store = site.store
    connector = _connector(site)
    _run(connector)
    vpn = _page_id(store, "Подключение к VPN")
    assert "Подключение к VPN" in _titles(people["demo"], "VPN клиент")
    # when «ИТ» is restricted to the admin (and the connector's account; lastmodified does not move)
    it = _page_id(store, "ИТ")
    store.set_read_restriction(it, users=["admin", "achilles-sync"])
    run = _run(connector, "permissions")
    assert run.changed >= 3
    assert "Подключение к VPN" not in _titles(people["demo"], "VPN клиент")
    assert "Подключение к VPN" in _titles(people["admin"], "VPN клиент")
    # when it is restricted away from the connector's account too: readable by nobody (fail closed)
    store.set_read_restriction(it, users=["admin"])
    _run(connector, "permissions")
    assert "Подключение к VPN" not in _titles(people["admin"], "VPN клиент")
    # when the restriction is lifted and the page is moved under the restricted «Кадры»
    store.set_read_restriction(_page_id(store, "ИТ"))
    store.move_page(vpn, _page_id(store, "Кадры"))
    _run(connector, "permissions")
    assert "Подключение к VPN" not in _titles(people["demo"], "VPN клиент")
    assert "Подключение к VPN" in _titles(people["kadry"], "VPN клиент")
    assert "Дежурства и инциденты" in _titles(people["demo"], "дежурства инциденты")


def test_the_token_never_reaches_logs_or_audit(site, people, caplog):
    caplog.set_level(logging.DEBUG)
    site.store.faults.add({"kind": "429", "path": "content/search", "retry_after": "0", "times": 1})
    connector = _connector(site)
    _run(connector)
    _run(connector, "permissions")
    text = "\n".join(f"{r.getMessage()} {r.args} {r.exc_text or ''}" for r in caplog.records)
    assert caplog.records and SYNC_TOKEN not in text
    assert AuditEvent.objects.exists()
    assert all(SYNC_TOKEN not in str(e.details) + e.target for e in AuditEvent.objects.all())
    assert SYNC_TOKEN not in str(list(ConnectorRun.objects.values()))


def test_a_run_cancelled_mid_run_stops_at_the_batch_boundary_and_keeps_its_checkpoint(people, monkeypatch):
    from knowledge.connectors.confluence import sync
    from knowledge.connectors.services import run_cancel

    store = ConfluenceStore()
    store.add_user("sync", email="sync@example.com")
    store.add_token("cancel-pat", "sync")
    store.add_space("BIG", "Big", permissions={"groups": ["confluence-users"]})
    for i in range(sync.BATCH + 10):
        store.add_page("BIG", f"Страница {i:03}", f"<p>Текст страницы номер {i}.</p>", author="sync")
    convert, converted = sync.storage_to_markdown, []

    def cancel_during_the_second_batch(*args, **kwargs):
        converted.append(1)
        if len(converted) == sync.BATCH + 3:  # the second batch is being fetched: an admin cancels
            run_cancel(connector_id=connector.pk, run_id=run.pk, actor=people["admin"])
        return convert(*args, **kwargs)

    monkeypatch.setattr(sync, "storage_to_markdown", cancel_during_the_second_batch)
    with running_confluence(store) as server:
        connector = connector_create(
            actor=None,
            fields=ConnectorFields(
                kind="confluence", name="big", base_url=server.url, token="cancel-pat", spaces=["BIG"]
            ),
        )
        run = ConnectorRun.objects.create(connector=connector, kind="content")
        # when
        state = run_execute(run.pk, connector_run_body)
    # then: the first batch stays, the second rolled back with its records and counters
    run.refresh_from_db()
    assert state == "cancelled" and run.state == "cancelled" and run.finished_at is not None
    assert run.checkpoint["start"] == sync.BATCH and run.seen == sync.BATCH and run.changed == sync.BATCH
    assert len(_ids(connector)) == sync.BATCH
    assert "admin" in run.error


@pytest.mark.parametrize("kind", ["content", "permissions"])
def test_a_token_served_as_anonymous_fails_the_run_and_deletes_nothing(people, kind):
    from knowledge.connectors.services import connector_update

    store = build_demo(ConfluenceStore(anonymous_access=True))
    store.set_space_permissions("KB", groups=["confluence-users"], anonymous=True, admins=["admin"])
    with running_confluence(store) as server:
        connector = _connector(server)
        _run(connector)
        stored = _ids(connector)
        # given: the token is revoked, and the public site answers its calls as an anonymous visitor's
        connector_update(actor=None, connector_id=connector.pk, fields=ConnectorFields(token="revoked-pat"))
        run = ConnectorRun.objects.create(connector=connector, kind=kind)
        # when
        state = run_execute(run.pk, connector_run_body)
    # then
    run.refresh_from_db()
    assert state == "failed" and "anonymous" in run.error and "revoked-pat" not in run.error
    assert _ids(connector) == stored and len(stored) == 9


def test_body_links_to_other_pages_become_graph_links_also_when_the_target_is_not_in_the_run(site, people):
    from knowledge.models import RecordLink

    store = site.store
    connector = _connector(site)
    home, vpn = _page_id(store, "База знаний «Борей»"), _page_id(store, "Подключение к VPN")

    def links_to() -> set[tuple[str, str]]:
        rows = RecordLink.objects.filter(
            from_record__source_system=connector.source_system, link_type="links_to"
        ).values_list("from_record__external_id", "to_record__external_id")
        return set(rows)

    # when: the first run (the VPN page is listed in the same run)
    _run(connector)
    # then: the home page's ac:link to «Подключение к VPN» is an edge of the graph
    assert links_to() == {(home, vpn)}
    # when: only the home page changes (the next run lists it alone: the target is looked up by title)
    store.update_page(home, body=store.content[home]["versions"][-1]["body"] + "<p>Обновлено.</p>")
    store.advance(minutes=1)
    before = store.last_seq
    run = _run(connector)
    # then
    assert run.changed == 1 and links_to() == {(home, vpn)}
    assert [r["query"].get("title") for r in store.requests(before, path=r"/rest/api/content$")] == [
        "Подключение к VPN"
    ]


def test_a_link_to_a_page_a_later_batch_brings_is_in_the_graph_after_the_same_run(site, people, monkeypatch):
    from knowledge.connectors.confluence import sync
    from knowledge.models import PendingLink, RecordLink

    store = site.store
    connector = _connector(site)
    # given: one page per batch, so a page's parent or link target often comes in a later batch
    monkeypatch.setattr(sync, "BATCH", 1)
    home, vpn = _page_id(store, "База знаний «Борей»"), _page_id(store, "Подключение к VPN")
    before = store.last_seq
    # when
    _run(connector)
    # then: the home page came in a batch before the VPN page's (so its link's target was not stored)
    batches = [r["query"].get("start") for r in store.requests(before, path=r"/rest/api/content/search$")]
    assert len(batches) > 2
    # and every child_of edge and the home page's link are there, nothing left pending
    edges = set(
        RecordLink.objects.filter(from_record__source_system=connector.source_system).values_list(
            "from_record__external_id", "to_record__external_id", "link_type"
        )
    )
    parents = {
        (page_id, str(content["parent"]), "child_of")
        for page_id, content in store.content.items()
        if content["type"] == "page" and content["status"] == "current" and content["parent"] is not None
    }
    assert parents and parents <= edges
    assert (home, vpn, "links_to") in edges
    assert not PendingLink.objects.exists()


def test_before_9_1_space_permissions_come_from_json_rpc(people):
    # given: DC 8.9 (no REST space permissions); the space also names a user and allows anonymous
    store = build_demo(ConfluenceStore(version="8.9.0", anonymous_access=True))
    store.set_space_permissions("KB", groups=["confluence-users"], users=["kadry"], anonymous=True, admins=["admin"])
    with running_confluence(store) as server:
        connector = _connector(server)
        # when
        run = _run(connector)
    # then: the same ACLs as from 9.1's REST, read through getSpacePermissionSets
    assert run.failed == 0 and len(_ids(connector)) == 9
    vpn = Record.objects.get(source_system=connector.source_system, title="Подключение к VPN")
    assert set(vpn.acl) == {"everyone", "public", f"user:{people['admin'].pk}", f"user:{people['kadry'].pk}"}
    assert [r["status"] for r in store.requests(path="json-rpc")] == [200]
    assert [r["status"] for r in store.requests(path="space/KB/permissions")] == [404]


def test_space_permissions_json_rpc_refused_makes_the_space_readable_by_nobody(people):
    store = build_demo(ConfluenceStore(version="8.9.0"))
    store.spaces["KB"]["perms"]["admins"].clear()  # the sync account administers no space: RPC refuses
    store.groups["confluence-administrators"].discard("achilles-sync")
    with running_confluence(store) as server:
        connector = _connector(server)
        run = _run(connector)
    vpn = Record.objects.get(source_system=connector.source_system, title="Подключение к VPN")
    assert run.failed == 0 and vpn.acl == ["user:0"]
