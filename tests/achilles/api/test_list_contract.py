"""The one list contract (``achilles.pagination``), checked on every list route of the API.

Each route in ``ROUTES`` seeds more rows than the default page (``N``) and is walked through the
ASGI application: the order is the declared one and stable, a walk of all pages returns every row
exactly once even with a row inserted between two fetches, ``limit`` defaults and is bounded, the
last page says ``next_cursor: null``, a forged or foreign cursor is 422 ``bad_cursor``, and the
number of queries does not grow with the page. ``test_every_list_route_is_registered`` fails when
a GET route answering a list or the envelope is added without an entry here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from achilles.pagination import DEFAULT_LIMIT, MAX_LIMIT, cursor_encode

pytestmark = [pytest.mark.api, pytest.mark.p1, pytest.mark.django_db]

N = DEFAULT_LIMIT + 7  # more than the default page, fewer than the largest


def _ts(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


@dataclass
class Seeded:
    """What a route's seed made: who asks, where, the keys it created, and how to add one more."""

    actor: object
    url: str
    created: list
    insert: Callable[[], object]
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ListRoute:
    path: str  # as the API declares it (the OpenAPI path)
    seed: Callable[[], Seeded]
    key: str  # the item field that names a row
    order: tuple[tuple[str, bool, Callable], ...]  # (field, descending, parse) — the declared total order
    id: str = ""

    def __str__(self) -> str:
        return self.id or self.path


# ------------------------------------------------------------------ seeds


def _user(username: str, **extra):
    from tests.achilles.factories import UserFactory

    return UserFactory(username=username, **extra)


def _hub_user():
    from hub.permissions import hub_group_ensure

    user = _user("lister", is_staff=True)
    user.groups.add(hub_group_ensure())
    return user


def _seed_models() -> Seeded:
    from achilles.models import AllowedModel

    AllowedModel.objects.bulk_create([AllowedModel(name=f"list-model-{i:03}", provider="builtin") for i in range(N)])
    counter = iter(range(N, 10**6))
    return Seeded(
        actor=_user("lister"),
        url="/api/models",
        created=[f"list-model-{i:03}" for i in range(N)],
        insert=lambda: AllowedModel.objects.create(name=f"list-model-{next(counter):03}", provider="builtin").name,
    )


def _seed_notifications() -> Seeded:
    from achilles.notifications import notification_create

    user = _user("notified")
    other = _user("someone-else")
    notification_create(user_id=other.pk, kind="hub_batch", title="not yours")

    def one(i) -> int:
        return notification_create(user_id=user.pk, kind="agent_run", title=f"n{i}", link="/agents/").pk

    created = [one(i) for i in range(N)]
    return Seeded(actor=user, url="/api/notifications", created=created, insert=lambda: one("late"))


def _seed_tokens() -> Seeded:
    from achilles.services import api_token_create

    user = _user("lister")
    created = [api_token_create(user=user, name=f"t{i}")[0].pk for i in range(N)]
    return Seeded(
        actor=user, url="/api/tokens", created=created, insert=lambda: api_token_create(user=user, name="late")[0].pk
    )


def _agents(owners, count: int):
    from agents.models import Agent

    rows = Agent.objects.bulk_create([Agent(owner=owners[i % len(owners)], name=f"agent {i:03}") for i in range(count)])
    return [a.pk for a in rows]


def _seed_agents() -> Seeded:
    from agents.models import Agent

    user = _user("lister")
    return Seeded(
        actor=user,
        url="/api/agents",
        created=_agents([user], N),
        insert=lambda: Agent.objects.create(owner=user, name="late").pk,
    )


def _seed_admin_agents() -> Seeded:
    from agents.models import Agent

    admin = _user("lister", is_staff=True)
    owners = [_user(f"owner{i}", timezone=tz) for i, tz in enumerate(("Europe/Moscow", "Asia/Tokyo", None))]
    return Seeded(
        actor=admin,
        url="/api/admin/agents",
        created=_agents(owners, N),
        insert=lambda: Agent.objects.create(owner=owners[0], name="late").pk,
    )


def _seed_runs() -> Seeded:
    from django.utils import timezone

    from agents.models import Agent, AgentRun

    user = _user("lister")
    agent = Agent.objects.create(owner=user, name="runner")

    def run():
        return AgentRun(
            agent=agent, trigger="scheduled", state="skipped", reason="already_running", finished_at=timezone.now()
        )

    created = [r.pk for r in AgentRun.objects.bulk_create([run() for _ in range(N)])]
    return Seeded(
        actor=user,
        url=f"/api/agents/{agent.pk}/runs",
        created=created,
        insert=lambda: AgentRun.objects.bulk_create([run()])[0].pk,
    )


def _seed_conversations() -> Seeded:
    from conversations.models import Conversation

    user = _user("lister")
    # one statement: every row has the same created_at/updated_at — the id breaks the ties
    rows = Conversation.objects.bulk_create([Conversation(user=user, title=f"c{i}") for i in range(N)])
    return Seeded(
        actor=user,
        url="/api/conversations",
        created=[str(c.pk) for c in rows],
        insert=lambda: str(Conversation.objects.create(user=user, title="late").pk),
    )


def _seed_messages(order: str) -> Callable[[], Seeded]:
    def seed() -> Seeded:
        from conversations.models import Conversation, Message

        user = _user("lister")
        thread = Conversation.objects.create(user=user, title="long")
        roles = ("user", "assistant")
        rows = Message.objects.bulk_create(
            [Message(conversation=thread, role=roles[i % 2], content=f"m{i}") for i in range(N)]
        )
        # a line: each message follows the one before it (the branch the thread shows)
        for previous, message in zip(rows, rows[1:], strict=False):
            message.parent = previous
        Message.objects.bulk_update(rows[1:], ["parent"])
        return Seeded(
            actor=user,
            url=f"/api/conversations/{thread.pk}/messages",
            created=[m.pk for m in rows],
            params={"order": order},
            insert=lambda: Message.objects.create(conversation=thread, role=roles[N % 2], content="late").pk,
        )

    return seed


def _seed_shares() -> Seeded:
    from conversations.models import Conversation, ConversationShare

    owner = _user("lister")
    thread = Conversation.objects.create(user=owner, title="shared")
    readers = [_user(f"reader-{i:03}") for i in range(N + 1)]
    rows = [ConversationShare.objects.create(conversation=thread, reader=r) for r in readers[:N]]
    return Seeded(
        actor=owner,
        url=f"/api/conversations/{thread.pk}/shares",
        created=[s.pk for s in rows],
        insert=lambda: ConversationShare.objects.create(conversation=thread, reader=readers[N]).pk,
    )


def _seed_shared_with_me() -> Seeded:
    from conversations.models import Conversation, ConversationShare

    owner, reader = _user("owner"), _user("lister")
    # one statement: every thread has the same updated_at — the id breaks the ties
    threads = Conversation.objects.bulk_create([Conversation(user=owner, title=f"shared {i}") for i in range(N)])
    ConversationShare.objects.bulk_create([ConversationShare(conversation=t, reader=reader) for t in threads])

    def share() -> str:
        thread = Conversation.objects.create(user=owner, title="late")
        ConversationShare.objects.create(conversation=thread, reader=reader)
        return str(thread.pk)

    return Seeded(actor=reader, url="/api/shared", created=[str(t.pk) for t in threads], insert=share)


def _seed_shared_messages() -> Seeded:
    from conversations.models import ConversationShare

    seeded = _seed_messages("asc")()
    owner = seeded.actor
    reader = _user("reader")
    thread_id = seeded.url.split("/")[3]
    ConversationShare.objects.create(conversation_id=thread_id, reader=reader)
    seeded.actor, seeded.url = reader, f"/api/shared/{thread_id}/messages"
    assert owner != reader
    return seeded


def _seed_issues() -> Seeded:
    from hub.models import MirrorIssue

    base = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)

    def issue(i: int, updated: dt.datetime) -> MirrorIssue:
        return MirrorIssue(
            key=f"LST-{i:03}", project="LST", summary=f"issue {i}", updated=updated, content_sha256="0" * 64
        )

    # three issues per `updated`: the key breaks the ties
    rows = MirrorIssue.objects.bulk_create([issue(i, base - dt.timedelta(minutes=i // 3)) for i in range(N)])
    return Seeded(
        actor=_hub_user(),
        url="/api/hub/issues",
        created=[r.key for r in rows],
        insert=lambda: MirrorIssue.objects.bulk_create([issue(900, base + dt.timedelta(days=1))])[0].key,
    )


def _seed_batches() -> Seeded:
    from hub.models import Batch

    rows = Batch.objects.bulk_create([Batch(title=f"batch {i}", author="api") for i in range(N)])
    return Seeded(
        actor=_hub_user(),
        url="/api/hub/batches",
        created=[b.pk for b in rows],
        insert=lambda: Batch.objects.create(title="late", author="api").pk,
    )


def _seed_sync_log() -> Seeded:
    from django.utils import timezone

    from hub.models import SyncRun

    def run() -> SyncRun:
        return SyncRun(kind="full", status="ok", finished_at=timezone.now() + dt.timedelta(minutes=1))

    rows = SyncRun.objects.bulk_create([run() for _ in range(N)])
    return Seeded(
        actor=_hub_user(),
        url="/api/hub/sync-log",
        created=[r.pk for r in rows],
        insert=lambda: SyncRun.objects.bulk_create([run()])[0].pk,
    )


def _seed_publications() -> Seeded:
    from hub.models import Publication

    artifact = b"artifact"

    def publication(version: int) -> Publication:
        return Publication(
            version=version, artifact=artifact, sha256=hashlib.sha256(artifact).hexdigest(), size=len(artifact)
        )

    Publication.objects.bulk_create([publication(v) for v in range(1, N + 1)])
    return Seeded(
        actor=_hub_user(),
        url="/api/hub/publications",
        created=list(range(1, N + 1)),
        insert=lambda: Publication.objects.bulk_create([publication(N + 100)])[0].version,
    )


def _seed_documents() -> Seeded:
    from knowledge.models import Document

    user = _user("lister")

    def document(i: int) -> Document:
        return Document(
            owner=user, filename=f"d{i}.txt", format="text", size=1, sha256="0" * 64, content=b"x", acl=["everyone"]
        )

    created = [d.pk for d in Document.objects.bulk_create([document(i) for i in range(N)])]
    return Seeded(
        actor=user,
        url="/api/knowledge/documents",
        created=created,
        insert=lambda: Document.objects.bulk_create([document(N + 1)])[0].pk,
    )


def _seed_connectors() -> Seeded:
    from knowledge.connectors.models import Connector

    def connector(i: int) -> Connector:
        return Connector(kind="confluence", name=f"wiki-{i:03}", base_url="https://wiki.example.com")

    created = [c.pk for c in Connector.objects.bulk_create([connector(i) for i in range(N)])]
    return Seeded(
        actor=_user("lister", is_staff=True),
        url="/api/knowledge/connectors",
        created=created,
        insert=lambda: Connector.objects.bulk_create([connector(N + 1)])[0].pk,
    )


def _seed_connector_runs() -> Seeded:
    from django.utils import timezone

    from knowledge.connectors.models import Connector, ConnectorRun

    wiki = Connector.objects.create(kind="confluence", name="wiki", base_url="https://wiki.example.com")

    def run() -> ConnectorRun:
        return ConnectorRun(connector=wiki, state="succeeded", finished_at=timezone.now())

    created = [r.pk for r in ConnectorRun.objects.bulk_create([run() for _ in range(N)])]
    return Seeded(
        actor=_user("lister", is_staff=True),
        url=f"/api/knowledge/connectors/{wiki.pk}/runs",
        created=created,
        insert=lambda: ConnectorRun.objects.bulk_create([run()])[0].pk,
    )


def _seed_usage() -> Seeded:
    from conversations.models import Conversation, Message

    def spender(i: int) -> str:
        person = _user(f"spender{i:03}")
        thread = Conversation.objects.create(user=person)
        Message.objects.create(conversation=thread, role="assistant", content="", model="m", tokens_used=10 + i)
        return person.username

    created = [spender(i) for i in range(N)]
    counter = iter(range(N, 10**6))
    return Seeded(
        actor=_user("lister", is_staff=True),
        url="/api/usage",
        created=created,
        params={"group_by": "user"},
        insert=lambda: spender(next(counter)),
    )


ROUTES = [
    ListRoute("/api/models", _seed_models, key="name", order=(("is_default", True, bool), ("name", False, str))),
    ListRoute("/api/notifications", _seed_notifications, key="id", order=(("id", True, int),)),
    ListRoute("/api/tokens", _seed_tokens, key="id", order=(("created_at", True, _ts), ("id", True, int))),
    ListRoute("/api/agents", _seed_agents, key="id", order=(("id", False, int),)),
    ListRoute("/api/admin/agents", _seed_admin_agents, key="id", order=(("id", False, int),)),
    ListRoute("/api/agents/{agent_id}/runs", _seed_runs, key="id", order=(("id", True, int),)),
    ListRoute(
        "/api/conversations", _seed_conversations, key="id", order=(("updated_at", True, _ts), ("id", True, uuid.UUID))
    ),
    ListRoute(
        "/api/conversations/{conversation_id}/messages",
        _seed_messages("asc"),
        key="id",
        order=(("id", False, int),),
        id="messages-asc",
    ),
    ListRoute(
        "/api/conversations/{conversation_id}/messages",
        _seed_messages("desc"),
        key="id",
        order=(("id", True, int),),
        id="messages-desc",
    ),
    ListRoute("/api/conversations/{conversation_id}/shares", _seed_shares, key="id", order=(("id", False, int),)),
    ListRoute(
        "/api/shared", _seed_shared_with_me, key="id", order=(("updated_at", True, _ts), ("id", True, uuid.UUID))
    ),
    ListRoute("/api/shared/{conversation_id}/messages", _seed_shared_messages, key="id", order=(("id", False, int),)),
    ListRoute("/api/hub/issues", _seed_issues, key="key", order=(("updated", True, _ts), ("key", False, str))),
    ListRoute("/api/hub/batches", _seed_batches, key="id", order=(("id", True, int),)),
    ListRoute("/api/hub/sync-log", _seed_sync_log, key="id", order=(("id", True, int),)),
    ListRoute("/api/hub/publications", _seed_publications, key="version", order=(("version", True, int),)),
    ListRoute("/api/knowledge/documents", _seed_documents, key="id", order=(("id", True, int),)),
    ListRoute("/api/knowledge/connectors", _seed_connectors, key="id", order=(("id", False, int),)),
    ListRoute(
        "/api/knowledge/connectors/{connector_id}/runs", _seed_connector_runs, key="id", order=(("id", True, int),)
    ),
    ListRoute("/api/usage", _seed_usage, key="key", order=(("key", False, str),)),
]


def _get(client, seeded: Seeded, **params):
    response = client.get(seeded.url, params={**seeded.params, **params})
    return response


def _page(client, seeded: Seeded, **params) -> dict:
    response = _get(client, seeded, **params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"items", "next_cursor"}
    return body


def _declared_order(route: ListRoute, items: list[dict]) -> list[dict]:
    ordered = list(items)
    for name, descending, parse in reversed(route.order):  # stable sorts, least significant key first
        ordered.sort(key=lambda item, name=name, parse=parse: parse(item[name]), reverse=descending)
    return ordered


# ------------------------------------------------------------------ the contract


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_pages_walk_every_row_once_in_a_stable_order(route, asgi_client):
    seeded = route.seed()
    client = asgi_client(seeded.actor)

    everything = _page(client, seeded, limit=MAX_LIMIT)
    assert everything["next_cursor"] is None  # the last page says so
    keys = [item[route.key] for item in everything["items"]]
    assert Counter(keys) & Counter(seeded.created) == Counter(seeded.created)  # every seeded row, once
    assert everything["items"] == _declared_order(route, everything["items"])
    assert _page(client, seeded, limit=MAX_LIMIT)["items"] == everything["items"]  # stable across calls

    first = _page(client, seeded)  # no limit: the default page
    assert len(first["items"]) == DEFAULT_LIMIT and first["next_cursor"]
    assert first["items"] == everything["items"][:DEFAULT_LIMIT]

    # A walk in pages of 20 with a row inserted after the first page: no duplicate, no gap.
    walked, cursor, inserted = [], None, None
    while True:
        page = _page(client, seeded, limit=20, **({"cursor": cursor} if cursor else {}))
        assert 0 < len(page["items"]) <= 20
        walked += [item[route.key] for item in page["items"]]
        if inserted is None:
            inserted = seeded.insert()
        cursor = page["next_cursor"]
        if cursor is None:
            break
    counts = Counter(walked)
    assert max(counts.values()) == 1, f"duplicates across pages: {[k for k, n in counts.items() if n > 1]}"
    assert [k for k in walked if k != inserted] == keys  # every earlier row, in the one order

    # One query plan per page, whatever its size (no N+1 over the items).
    with CaptureQueriesContext(connection) as small:
        assert len(_page(client, seeded, limit=5)["items"]) == 5
    with CaptureQueriesContext(connection) as large:
        assert len(_page(client, seeded, limit=50)["items"]) == 50
    assert len(large.captured_queries) == len(small.captured_queries), [q["sql"] for q in large.captured_queries]


def _bad_cursors(seeded: Seeded, client) -> dict[str, str]:
    real = _page(client, seeded, limit=2)["next_cursor"]
    payload, signature = real.rsplit(".", 1)
    flipped = payload[:-1] + ("A" if payload[-1] != "A" else "B")
    from achilles.models import ApiToken

    foreign = cursor_encode(ApiToken.objects.first(), scope="elsewhere", keys=("-id",))
    return {
        "garbage": "not-a-cursor",
        "tampered": f"{flipped}.{signature}",
        "unsigned": payload,
        "another list's": foreign,
        "empty signature": f"{payload}.",
        "overlong": real * 50,
    }


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_bad_cursor_and_limit_bounds_are_422(route, asgi_client):
    seeded = route.seed()
    client = asgi_client(seeded.actor)
    for name, cursor in _bad_cursors(seeded, client).items():
        response = _get(client, seeded, cursor=cursor)
        assert response.status_code == 422, (name, response.text)
        body = response.json()
        assert body["code"] == "bad_cursor", name
        assert body["detail"][0]["loc"] == ["query", "cursor"]
    for limit in (0, -1, MAX_LIMIT + 1, "many"):
        response = _get(client, seeded, limit=limit)
        assert response.status_code == 422, (limit, response.text)
        assert response.json()["code"] == "validation_error"
        assert response.json()["detail"][0]["loc"] == ["query", "limit"]
    assert len(_page(client, seeded, limit=MAX_LIMIT)["items"]) >= N


# ------------------------------------------------------------------ the registry is complete


def _list_routes() -> set[str]:
    """Every GET route of the ninja API answering a JSON list or the list envelope (``items`` /
    ``next_cursor``). The sync agent's protocol (PROTOCOL.md) is a binding wire format of its own."""
    from achilles.api import api

    schema = api.get_openapi_schema(path_prefix="/api")
    components = schema["components"]["schemas"]
    found = set()
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if get is None or path.startswith("/api/hub/sync-agent/"):
            continue
        for response in get["responses"].values():
            body = response.get("content", {}).get("application/json", {}).get("schema", {})
            if "$ref" in body:
                body = components[body["$ref"].rsplit("/", 1)[1]]
            if body.get("type") == "array" or {"items", "next_cursor"} & set(body.get("properties", {})):
                found.add(path)
    return found


# Lists with a bound of their own, never paged (so outside the cursor contract), each with why.
BOUNDED_LISTS = {
    "/api/knowledge/sources": "one row per source system (Файлы, Confluence, Jira, …) the reader may read",
    "/api/agents/{agent_id}/subscriptions": "an agent's hub-event subscriptions: at most 20 (subscription_limit)",
}


def test_every_list_route_is_registered():
    assert _list_routes() - BOUNDED_LISTS.keys() == {route.path for route in ROUTES}
    assert BOUNDED_LISTS.keys() <= _list_routes(), "a bounded list named here is no longer a list route"


def test_the_detector_sees_a_list_route_that_is_not_registered():
    """The registry check is not vacuous: a new GET route answering a list is found."""
    from ninja import NinjaAPI, Router

    from achilles import api as api_module

    router = Router()

    @router.get("/unregistered", response=list[int])
    def unregistered(request):
        return []

    probe = NinjaAPI(urls_namespace="probe-lists")
    probe.add_router("/", router)
    original = api_module.api
    api_module.api = probe
    try:
        assert _list_routes() == {"/api/unregistered"}
    finally:
        api_module.api = original
