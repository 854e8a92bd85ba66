"""Redis down is not a 500 (issue 10, finding 8).

The probe stopped Redis under ``make run``: ``/api/me``, ``GET /api/agents`` and run-now answered
500 and ``/api/chat`` an HTML 500. Here the cache and the Celery broker point at a socket where no
Redis listens (what every client sees of a stopped Redis) and every route of the OpenAPI, plus
``/api/chat``, is called with valid input: each answers its normal result — the caches fall back
to the database, the platform settings accessor reads the row, a run-now leaves a queued run the
scheduler tick re-sends — or a JSON 503 with a code; never a 500, never HTML. Failed before the fix.
"""

from __future__ import annotations

import base64
import json
import re

import pytest
from django.test import Client

from achilles.api import api

pytestmark = [pytest.mark.api, pytest.mark.django_db]

REDIS_CODES = {"cache_unavailable", "broker_unavailable"}


@pytest.fixture
def redis_stopped(settings, tmp_path):
    """The cache, the broker and the hub's pub/sub all lose Redis (a dead unix socket: connection refused)."""
    from achilles.celery_app import app
    from hub import notify

    dead = f"unix://{tmp_path}/stopped-redis.sock"
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": dead}}
    settings.REDIS_URL = dead
    notify.redis_client.cache_clear()  # the per-process client was built for the live Redis
    broker = app.conf.broker_url
    app.conf.broker_url = dead.replace("unix://", "redis+socket://", 1)
    app._pool = app.amqp._producer_pool = None  # the pools were built for the live broker
    yield
    if app._pool is not None:
        app._pool.force_close_all()
    app.conf.broker_url = broker
    app._pool = app.amqp._producer_pool = None
    notify.redis_client.cache_clear()


@pytest.fixture
def world(db, user_factory, model_factory):
    from agents.models import Agent
    from conversations.models import Conversation, Message
    from knowledge import facade

    model_factory(name="chat-default", provider="builtin", is_default=True)
    admin = user_factory(username="root", is_staff=True, is_superuser=True)
    agent = Agent.objects.create(
        owner=admin, name="сводка", instructions="x", model=model_factory(name="chat-2", provider="builtin")
    )
    conversation = Conversation.objects.create(user=admin, title="t")
    Message.objects.create(conversation=conversation, role="user", content="q")
    reply = Message.objects.create(conversation=conversation, role="assistant", content="a [1]")
    from conversations.models import ConversationShare

    colleague = user_factory(username="colleague")
    theirs = Conversation.objects.create(user=colleague, title="их")
    Message.objects.create(conversation=theirs, role="user", content="q")
    ConversationShare.objects.create(conversation=theirs, reader=admin)
    record_id = facade.upsert_record(
        source_system="files", external_id="otpusk", title="Отпуск", text="Отпуск 28 дней.", acl=["everyone"]
    )
    from knowledge.models import Document

    document = Document.objects.create(
        owner=admin, filename="a.txt", format="text", size=4, sha256="", content=b"text", acl=["everyone"]
    )
    from knowledge.connectors.models import Connector

    connector = Connector.objects.create(kind="confluence", name="wiki", base_url="https://wiki.example.com")
    from achilles.notifications import notification_create

    notice = notification_create(user_id=admin.pk, kind="agent_run", title="Агент «сводка» закончил работу")
    return {
        "admin": admin,
        "notification_id": notice.pk,
        "connector_id": connector.pk,
        "agent_id": agent.pk,
        "conversation_id": str(conversation.pk),
        "shared_id": str(theirs.pk),
        "colleague_id": colleague.pk,
        "message_id": reply.pk,
        "record_id": record_id,
        "document_id": document.pk,
    }


def _multipart(data: dict) -> dict:
    """Client kwargs for a multipart body (the upload route takes files, not JSON)."""
    from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

    return {"data": encode_multipart(BOUNDARY, data), "content_type": MULTIPART_CONTENT}


def _calls(world, token_id):
    """(method, path, body) for every route of the OpenAPI, with valid input."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    agent, conversation, message = world["agent_id"], world["conversation_id"], world["message_id"]
    document = world["document_id"]
    connector = world["connector_id"]
    return {
        ("GET", "/api/me"): None,
        ("GET", "/api/version"): None,
        ("PATCH", "/api/me"): ("/api/me", {"timezone": "Europe/Moscow"}),
        ("GET", "/api/models"): None,
        ("GET", "/api/tokens"): None,
        ("POST", "/api/tokens"): {"name": "ноутбук"},
        ("DELETE", "/api/tokens/{token_id}"): (f"/api/tokens/{token_id}", None),
        ("GET", "/api/notifications"): None,
        ("GET", "/api/notifications/unread"): None,
        ("POST", "/api/notifications/{notification_id}/read"): (
            f"/api/notifications/{world['notification_id']}/read",
            None,
        ),
        ("POST", "/api/notifications/read-all"): None,
        ("GET", "/api/agents"): None,
        ("POST", "/api/agents"): {"name": "новый агент", "instructions": "x"},
        ("GET", "/api/agents/{agent_id}"): (f"/api/agents/{agent}", None),
        ("PATCH", "/api/agents/{agent_id}"): (f"/api/agents/{agent}", {"instructions": "y"}),
        ("POST", "/api/agents/{agent_id}/run"): (f"/api/agents/{agent}/run", None),
        ("GET", "/api/agents/{agent_id}/runs"): (f"/api/agents/{agent}/runs", None),
        ("GET", "/api/agents/{agent_id}/subscriptions"): (f"/api/agents/{agent}/subscriptions", None),
        ("POST", "/api/agents/{agent_id}/subscriptions"): (
            f"/api/agents/{agent}/subscriptions",
            {"events": ["transitioned"], "project": "AURORA"},
        ),
        ("DELETE", "/api/agents/{agent_id}/subscriptions/{subscription_id}"): (
            f"/api/agents/{agent}/subscriptions/999999",
            None,
        ),
        ("GET", "/api/admin/agents"): None,
        ("POST", "/api/admin/agents/{agent_id}/pause"): (f"/api/admin/agents/{agent}/pause", None),
        ("POST", "/api/admin/agents/{agent_id}/resume"): (f"/api/admin/agents/{agent}/resume", None),
        ("GET", "/api/conversations"): None,
        ("GET", "/api/conversations/{conversation_id}"): (f"/api/conversations/{conversation}", None),
        ("GET", "/api/conversations/{conversation_id}/messages"): (f"/api/conversations/{conversation}/messages", None),
        ("PATCH", "/api/conversations/{conversation_id}"): (f"/api/conversations/{conversation}", {"title": "новое"}),
        ("PUT", "/api/messages/{message_id}/feedback"): (f"/api/messages/{message}/feedback", {"value": 1}),
        ("POST", "/api/messages/{message_id}/choose"): (f"/api/messages/{message}/choose", None),
        ("GET", "/api/conversations/{conversation_id}/export"): (f"/api/conversations/{conversation}/export", None),
        ("POST", "/api/conversations/{conversation_id}/shares"): (
            f"/api/conversations/{conversation}/shares",
            {"username": "colleague"},
        ),
        ("GET", "/api/conversations/{conversation_id}/shares"): (f"/api/conversations/{conversation}/shares", None),
        ("GET", "/api/shared"): None,
        ("GET", "/api/shared/{conversation_id}"): (f"/api/shared/{world['shared_id']}", None),
        ("GET", "/api/shared/{conversation_id}/messages"): (f"/api/shared/{world['shared_id']}/messages", None),
        ("GET", "/api/shared/{conversation_id}/export"): (f"/api/shared/{world['shared_id']}/export?format=pdf", None),
        ("POST", "/api/messages/{message_id}/citations/{record_id}/click"): (
            f"/api/messages/{message}/citations/{world['record_id']}/click",
            None,
        ),
        ("POST", "/api/messages/{message_id}/access-requests"): (
            f"/api/messages/{message}/access-requests",
            {"source_system": "files", "contact_id": 1},
        ),
        ("POST", "/api/knowledge/search"): {"query": "отпуск"},
        ("GET", "/api/knowledge/status"): None,
        ("GET", "/api/knowledge/sources"): None,
        ("PUT", "/api/knowledge/records"): {
            "source_system": "files",
            "external_id": "new",
            "title": "Новый",
            "text": "Текст.",
            "acl": ["everyone"],
        },
        ("POST", "/api/knowledge/documents"): (
            "/api/knowledge/documents",
            None,
            _multipart({"files": [SimpleUploadedFile("a.txt", b"text")], "acl": "everyone"}),
        ),
        ("GET", "/api/knowledge/documents"): None,
        ("GET", "/api/knowledge/documents/{document_id}"): (f"/api/knowledge/documents/{document}", None),
        ("GET", "/api/knowledge/documents/{document_id}/download"): (
            f"/api/knowledge/documents/{document}/download",
            None,
        ),
        ("PUT", "/api/knowledge/documents/{document_id}"): (
            f"/api/knowledge/documents/{document}",
            None,
            _multipart({"file": SimpleUploadedFile("b.txt", b"new text")}),
        ),
        ("GET", "/api/usage"): None,
        ("GET", "/api/usage.csv"): None,
        ("GET", "/api/knowledge/connectors"): None,
        ("POST", "/api/knowledge/connectors"): {
            "name": "wiki-2",
            "base_url": "https://wiki2.example.com",
            "token": "t",
            "spaces": ["ENG"],
        },
        ("GET", "/api/knowledge/connectors/{connector_id}"): (f"/api/knowledge/connectors/{connector}", None),
        ("PATCH", "/api/knowledge/connectors/{connector_id}"): (
            f"/api/knowledge/connectors/{connector}",
            {"enabled": False},
        ),
        ("POST", "/api/knowledge/connectors/{connector_id}/run"): (f"/api/knowledge/connectors/{connector}/run", None),
        ("GET", "/api/knowledge/connectors/{connector_id}/runs"): (f"/api/knowledge/connectors/{connector}/runs", None),
        ("GET", "/api/knowledge/connectors/{connector_id}/runs/{run_id}"): (
            f"/api/knowledge/connectors/{connector}/runs/1",
            None,
        ),
        ("POST", "/api/knowledge/connectors/{connector_id}/runs/{run_id}/cancel"): (
            f"/api/knowledge/connectors/{connector}/runs/1/cancel",
            None,
        ),
        # deletes last: the objects above are used first
        ("DELETE", "/api/knowledge/documents/{document_id}"): (f"/api/knowledge/documents/{document}", None),
        ("DELETE", "/api/knowledge/records"): ("/api/knowledge/records?source_system=files&external_id=new", None),
        ("DELETE", "/api/knowledge/connectors/{connector_id}"): (f"/api/knowledge/connectors/{connector}", None),
        ("DELETE", "/api/agents/{agent_id}"): (f"/api/agents/{agent}", None),
        ("DELETE", "/api/conversations/{conversation_id}/shares/{reader_id}"): (
            f"/api/conversations/{conversation}/shares/{world['colleague_id']}",
            None,
        ),
        ("DELETE", "/api/conversations/{conversation_id}"): (f"/api/conversations/{conversation}", None),
    }


def _hub_steps(world):
    """The hub's routes in an order where each uses what the ones before made: (method, template, make, keep).

    ``make(state)`` → (path, body, who) with who ∈ person (the staff superuser) / agent (the sync agent's
    token); ``keep(state, json)`` records ids and lease tokens for the steps after it."""
    from tests.hub.conftest import issue_payload

    def put(key):
        return lambda state, body: state.__setitem__(key, body)

    def nothing(state, body):
        return None

    key = "AURORA-1538"
    artifact = base64.b64encode(b"\x1f\x8b not really a tarball").decode()
    return [
        (
            "PUT",
            "/api/hub/settings/{key}",
            lambda s: ("/api/hub/settings/poll_interval_seconds", {"value": 10}, "person"),
            nothing,
        ),
        ("GET", "/api/hub/settings", lambda s: ("/api/hub/settings", None, "person"), nothing),
        ("GET", "/api/hub/settings/{key}", lambda s: ("/api/hub/settings/base_label", None, "person"), nothing),
        (
            "POST",
            "/api/hub/sync-agent/sync-runs",
            lambda s: ("/api/hub/sync-agent/sync-runs", {"kind": "incremental"}, "agent"),
            put("run"),
        ),
        (
            "POST",
            "/api/hub/sync-agent/upload",
            lambda s: (
                "/api/hub/sync-agent/upload",
                {"sync_run_id": s["run"]["id"], "issues": [issue_payload(key), issue_payload("AURORA-1540")]},
                "agent",
            ),
            nothing,
        ),
        (
            "POST",
            "/api/hub/sync-agent/sync-runs/{run_id}/finish",
            lambda s: (
                f"/api/hub/sync-agent/sync-runs/{s['run']['id']}/finish",
                {"status": "ok", "counts": {"issues": 2}, "errors": []},
                "agent",
            ),
            nothing,
        ),
        ("GET", "/api/hub/issues", lambda s: ("/api/hub/issues?project=AURORA", None, "person"), nothing),
        ("GET", "/api/hub/issues/{key}", lambda s: (f"/api/hub/issues/{key}", None, "person"), nothing),
        (
            "PATCH",
            "/api/hub/issues/{key}/notes",
            lambda s: (f"/api/hub/issues/{key}/notes", {"note": "ждём ответа"}, "person"),
            nothing,
        ),
        (
            "POST",
            "/api/hub/batches",
            lambda s: (
                "/api/hub/batches",
                {
                    "title": "срок",
                    "commands": [{"type": "ensure_fields", "key": key, "fields": {"duedate": "2026-12-02"}}],
                },
                "person",
            ),
            put("batch"),
        ),
        ("GET", "/api/hub/batches", lambda s: ("/api/hub/batches", None, "person"), nothing),
        (
            "GET",
            "/api/hub/batches/{batch_id}",
            lambda s: (f"/api/hub/batches/{s['batch']['id']}", None, "person"),
            put("batch_view"),
        ),
        (
            "POST",
            "/api/hub/sync-agent/claim",
            lambda s: (
                "/api/hub/sync-agent/claim",
                {"version": 6, "launcher_version": 1, "settings_version": None},
                "agent",
            ),
            put("claim"),
        ),
        (
            "POST",
            "/api/hub/sync-agent/report",
            lambda s: (
                "/api/hub/sync-agent/report",
                {
                    "results": [
                        {
                            "command_id": c["id"],
                            "lease_token": c["lease_token"],
                            "status": "done",
                            "result": {"changed": []},
                        }
                        for c in s["claim"]["commands"]
                    ]
                },
                "agent",
            ),
            nothing,
        ),
        # the batch's appended refresh is still queued: cancelling it finishes the batch (a publish on commit)
        (
            "POST",
            "/api/hub/commands/{command_id}/cancel",
            lambda s: (f"/api/hub/commands/{s['batch_view']['commands'][-1]['id']}/cancel", None, "person"),
            nothing,
        ),
        (
            "GET",
            "/api/hub/batches/{batch_id}/wait",
            lambda s: (f"/api/hub/batches/{s['batch']['id']}/wait?timeout_minutes=0.02", None, "person"),
            nothing,
        ),
        (
            "POST",
            "/api/hub/commands/{command_id}/retry",
            lambda s: (f"/api/hub/commands/{s['batch_view']['commands'][-1]['id']}/retry", None, "person"),
            put("retry"),
        ),
        ("POST", "/api/hub/refresh", lambda s: ("/api/hub/refresh", {"keys": [key]}, "person"), put("refresh")),
        (
            "POST",
            "/api/hub/batches/{batch_id}/cancel",
            lambda s: (f"/api/hub/batches/{s['refresh']['id']}/cancel", None, "person"),
            nothing,
        ),
        ("GET", "/api/hub/agent-status", lambda s: ("/api/hub/agent-status", None, "person"), nothing),
        ("GET", "/api/hub/sync-log", lambda s: ("/api/hub/sync-log", None, "person"), nothing),
        (
            "POST",
            "/api/hub/publications",
            lambda s: ("/api/hub/publications", {"version": 7, "artifact_base64": artifact, "notes": "v7"}, "person"),
            nothing,
        ),
        ("GET", "/api/hub/publications", lambda s: ("/api/hub/publications", None, "person"), nothing),
        (
            "GET",
            "/api/hub/sync-agent/publications/{version}",
            lambda s: ("/api/hub/sync-agent/publications/7", None, "agent"),
            nothing,
        ),
    ]


def _openapi_routes() -> set[tuple[str, str]]:
    schema = api.get_openapi_schema(path_prefix="/api")
    return {(method.upper(), path) for path, methods in schema["paths"].items() for method in methods}


def _check(response, what):
    content_type = response.get("Content-Type", "")
    assert response.status_code < 500 or response.status_code == 503, (
        what,
        response.status_code,
        response.content[:300],
    )
    assert "text/html" not in content_type, (what, response.content[:300])
    if response.status_code == 503:
        assert response.json()["code"] in REDIS_CODES, what
    return response


def test_every_route_answers_without_redis(world, redis_stopped, token_for, django_capture_on_commit_callbacks):
    from achilles.services import api_token_create
    from hub.protocol import sync_agent_create
    from knowledge.models import Record

    headers = token_for(world["admin"])
    token_id = api_token_create(user=world["admin"], name="to revoke")[0].pk
    calls = _calls(world, token_id)
    hub_steps = _hub_steps(world)
    hub_routes = [(method, template) for method, template, _, _ in hub_steps]
    assert len(set(hub_routes)) == len(hub_routes)
    assert set(calls) | set(hub_routes) == _openapi_routes(), "a route of the OpenAPI is missing from this walk"
    client = Client(raise_request_exception=False)
    statuses = {}
    for (method, template), spec in calls.items():
        path, body, *multipart = spec if isinstance(spec, tuple) else (template, spec)
        kwargs = {"data": json.dumps(body), "content_type": "application/json"} if body is not None else {}
        kwargs = multipart[0] if multipart else kwargs
        with django_capture_on_commit_callbacks(execute=True):
            response = _check(client.generic(method, path, **kwargs, **headers), (method, path))
        statuses[(method, template)] = response.status_code
    who = {"person": headers, "agent": {"HTTP_AUTHORIZATION": f"Bearer {sync_agent_create(name='onprem-1')[1]}"}}
    state: dict = {}
    for method, template, make, keep in hub_steps:
        path, body, caller = make(state)
        kwargs = {"data": json.dumps(body), "content_type": "application/json"} if body is not None else {}
        with django_capture_on_commit_callbacks(execute=True):
            response = _check(client.generic(method, path, **kwargs, **who[caller]), (method, path))
        statuses[(method, template)] = response.status_code
        if response.status_code < 300 and response.get("Content-Type", "").startswith("application/json"):
            keep(state, response.json())
    # where Redis is not needed, the normal result
    assert statuses[("GET", "/api/me")] == 200
    assert statuses[("GET", "/api/version")] == 200
    assert statuses[("PATCH", "/api/me")] == 200
    # the notices live in PostgreSQL (only their live push needs Redis)
    assert statuses[("GET", "/api/notifications")] == 200
    assert statuses[("POST", "/api/notifications/{notification_id}/read")] == 200
    assert statuses[("GET", "/api/agents")] == 200
    assert statuses[("POST", "/api/agents")] == 201
    assert statuses[("POST", "/api/knowledge/search")] == 200
    assert statuses[("PATCH", "/api/agents/{agent_id}")] == 200
    # run-now: the run is stored queued (the scheduler tick re-sends it once the broker is back)
    assert statuses[("POST", "/api/agents/{agent_id}/run")] == 202
    # event subscriptions live in PostgreSQL alone
    assert statuses[("POST", "/api/agents/{agent_id}/subscriptions")] == 201
    assert statuses[("GET", "/api/agents/{agent_id}/subscriptions")] == 200
    # an upload is stored queued (the re-send job sends its parse task once the broker is back)
    assert statuses[("POST", "/api/knowledge/documents")] == 202
    assert statuses[("GET", "/api/knowledge/documents/{document_id}/download")] == 200
    assert statuses[("PUT", "/api/knowledge/documents/{document_id}")] == 202
    # a connector run is stored queued (the reaper sends it once the broker is back)
    assert statuses[("POST", "/api/knowledge/connectors/{connector_id}/run")] == 202
    # the hub: its data lives in PostgreSQL; Redis only wakes waiters and queues the Knowledge Store feed
    hub_normal = {
        ("POST", "/api/hub/batches"): 201,
        ("POST", "/api/hub/refresh"): 201,
        ("POST", "/api/hub/commands/{command_id}/retry"): 201,
        ("POST", "/api/hub/publications"): 201,
        ("POST", "/api/hub/sync-agent/sync-runs"): 201,
    }
    for route in hub_routes:
        assert statuses[route] == hub_normal.get(route, 200), (route, statuses[route])
    assert [c["command"]["type"] for c in state["claim"]["commands"]] == ["ensure_fields"]
    # the upload's Knowledge Store feed could not be queued: it ran inline instead of being lost
    assert set(Record.objects.filter(source_system="jira").values_list("external_id", flat=True)) == {
        "AURORA-1538",
        "AURORA-1540",
    }


def test_run_now_without_a_broker_leaves_one_queued_run_for_the_redispatcher(
    world, redis_stopped, token_for, django_capture_on_commit_callbacks
):
    from agents.models import AgentRun

    with django_capture_on_commit_callbacks(execute=True):
        response = Client().post(f"/api/agents/{world['agent_id']}/run", **token_for(world["admin"]))
    assert response.status_code == 202
    run = AgentRun.objects.get(agent_id=world["agent_id"])
    assert (run.state, run.enqueued_at) == ("queued", None)  # not enqueued: the tick will re-send it


def test_the_platform_settings_accessor_reads_the_row_without_redis(db, redis_stopped):
    from achilles.models import PlatformSettings
    from achilles.platform import platform_settings

    PlatformSettings.objects.update_or_create(id=1, defaults={"timezone": "Asia/Tokyo"})
    assert platform_settings().timezone == "Asia/Tokyo"


@pytest.mark.django_db(transaction=True)
def test_chat_answers_without_redis_as_a_stream_or_json(world, redis_stopped, token_for):
    from asgiref.sync import async_to_sync

    async def collect(stream):
        return b"".join([chunk async for chunk in stream])

    response = Client(raise_request_exception=False).post(
        "/api/chat",
        data={"content": "Сколько дней отпуска?"},
        content_type="application/json",
        **token_for(world["admin"]),
    )
    if response.streaming:
        body = async_to_sync(collect)(response.streaming_content).decode()
        assert re.search(r"^event: (done|error)$", body, re.M), body[-300:]
        assert "internal_error" not in body, body[-300:]
    else:
        _check(response, "/api/chat")


def test_batch_wait_without_redis_reads_the_batch_from_the_database(world, redis_stopped, token_for):
    """Failed before the fix: the wait subscribed to Redis pub/sub first and answered 503 ``cache_unavailable``
    even for a batch PostgreSQL already knew was finished. Now it polls the database until its timeout."""
    import time

    from hub import services

    admin = world["admin"]
    created = services.refresh(user=admin, keys=None, full=True, author="api")
    headers = token_for(admin)
    started = time.monotonic()
    open_batch = Client(raise_request_exception=False).get(
        f"/api/hub/batches/{created.id}/wait?timeout_minutes=0.02", **headers
    )
    assert open_batch.status_code == 200, open_batch.content
    assert (open_batch.json()["finished"], open_batch.json()["timed_out"]) == (False, True)
    assert time.monotonic() - started >= 1.2  # it waited its timeout, it did not give up at once
    assert services.batch_wait(user=admin, batch_id=created.id, timeout_minutes=0.01).timed_out is True

    services.batch_cancel(user=admin, batch_id=created.id)
    finished = Client(raise_request_exception=False).get(
        f"/api/hub/batches/{created.id}/wait?timeout_minutes=1", **headers
    )
    assert finished.status_code == 200, finished.content
    assert (finished.json()["finished"], finished.json()["timed_out"]) == (True, False)
    assert services.batch_wait(user=admin, batch_id=created.id, timeout_minutes=1).finished is True
