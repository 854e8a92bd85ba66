"""/metrics in the Prometheus text format (docs/metrics.md).

Two kinds of series:

- events (requests, chat turns, searches, Celery task outcomes) are counted where they happen, in
  prometheus_client's multiprocess mode: each process writes into files of
  ``settings.METRICS_DIR`` and the scrape sums them, so with two daphne processes behind the proxy
  either one answers with the machine's total;
- states (queue depths, agent runs, hub commands, sync-agent lag) are read from PostgreSQL and Redis
  at scrape time, so every web process answers the same, whichever the scraper reaches.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from functools import lru_cache

import redis
from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse

from achilles.errors import ApplicationError, NotAuthenticated, PermissionDenied, render

# prometheus_client chooses its value class (multiprocess files, or memory) when first imported; the
# settings set PROMETHEUS_MULTIPROC_DIR, so they are loaded first, whoever imports this module first.
_MULTIPROCESS_DIR = settings.METRICS_DIR

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest  # noqa: E402
from prometheus_client.core import GaugeMetricFamily  # noqa: E402
from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

REQUESTS = Counter(
    "achilles_http_requests", "HTTP requests by resolved route, method and status", ["route", "method", "status"]
)
REQUEST_SECONDS = Histogram(
    "achilles_http_request_duration_seconds",
    "Time to the response (for a stream: to its headers), by resolved route",
    ["route", "method"],
    buckets=LATENCY_BUCKETS,
)
CHAT_TURNS = Counter("achilles_chat_turns", "Chat turns by how they ended (complete, error, cancelled)", ["outcome"])
CHAT_FIRST_SENTENCE_SECONDS = Histogram(
    "achilles_chat_first_sentence_seconds",
    "From a turn's start to its first released text (the first sentence the gate passed)",
    buckets=LATENCY_BUCKETS,
)
SEARCH_SECONDS = Histogram(
    "achilles_knowledge_search_duration_seconds",
    "Knowledge Store calls by path (search, graph, sql)",
    ["path"],
    buckets=LATENCY_BUCKETS,
)
TASKS = Counter("achilles_celery_tasks", "Celery tasks by name and outcome", ["task", "outcome"])

UNMATCHED = "<unmatched>"


def route_of(request) -> str:
    """The URL pattern the request resolved to (``api/agents/<int:agent_id>``), never the raw path."""
    match = getattr(request, "resolver_match", None)
    return match.route if match is not None and match.route else UNMATCHED


class RequestMetricsMiddleware:
    """Counts every request by its route and status and times it (about 9 µs a request, docs/metrics.md)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def _record(self, request, status: int, started: float) -> None:
        route, method = route_of(request), request.method
        REQUESTS.labels(route, method, str(status)).inc()
        REQUEST_SECONDS.labels(route, method).observe(time.perf_counter() - started)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        started = time.perf_counter()
        response = self.get_response(request)
        self._record(request, response.status_code, started)
        return response

    async def __acall__(self, request):
        started = time.perf_counter()
        response = await self.get_response(request)
        self._record(request, response.status_code, started)
        return response


class Timed:
    """``with Timed(SEARCH_SECONDS, "search"):`` — observes the block's duration, raised or not."""

    __slots__ = ("child", "started")

    def __init__(self, histogram: Histogram, *labels: str):
        self.child = histogram.labels(*labels) if labels else histogram
        self.started = 0.0

    def __enter__(self):
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.child.observe(time.perf_counter() - self.started)
        return False


def chat_turn_record(outcome: str, first_release_ms: float | None) -> None:
    CHAT_TURNS.labels(outcome).inc()
    if first_release_ms is not None:
        CHAT_FIRST_SENTENCE_SECONDS.observe(first_release_ms / 1000)


def task_record(task: str, outcome: str) -> None:
    TASKS.labels(task, outcome).inc()


# ---------------------------------------------------------------- states, read at scrape time

_AGENT_RUNS = "SELECT state, reason, count(*) FROM agent_runs GROUP BY state, reason"
_HUB_COMMANDS = "SELECT state, count(*) FROM hub_commands GROUP BY state"
_SYNC_LAG = (
    "SELECT a.name, greatest(0, extract(epoch FROM clock_timestamp() - c.last_contact_at)) FROM hub_sync_agents a"
    " JOIN hub_sync_agent_contacts c ON c.sync_agent_id = a.id WHERE a.revoked_at IS NULL"
)


def _queues() -> list[str]:
    return [q.name for q in settings.CELERY_TASK_QUEUES]


class StateCollector:
    """Gauges read from PostgreSQL and Redis when scraped (the same from every process)."""

    def collect(self):
        depth = GaugeMetricFamily("achilles_celery_queue_depth", "Messages waiting in a Celery queue", labels=["queue"])
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        try:
            with client.pipeline(transaction=False) as pipe:
                queues = _queues()
                for name in queues:
                    pipe.llen(name)
                for name, length in zip(queues, pipe.execute(), strict=True):
                    depth.add_metric([name], length)
        finally:
            client.close()
        yield depth
        runs = GaugeMetricFamily(
            "achilles_agent_runs", "Agent runs by state and reason (skip or failure reason)", labels=["state", "reason"]
        )
        commands = GaugeMetricFamily("achilles_hub_commands", "Hub commands by state", labels=["state"])
        lag = GaugeMetricFamily(
            "achilles_sync_agent_lag_seconds", "Seconds since a sync agent last called the hub", labels=["sync_agent"]
        )
        with connection.cursor() as cursor:
            cursor.execute(_AGENT_RUNS)
            for state, reason, count in cursor.fetchall():
                runs.add_metric([state, reason], count)
            cursor.execute(_HUB_COMMANDS)
            for state, count in cursor.fetchall():
                commands.add_metric([state], count)
            cursor.execute(_SYNC_LAG)
            for name, seconds in cursor.fetchall():
                lag.add_metric([name], float(seconds))
        yield runs
        yield commands
        yield lag


def exposition() -> bytes:
    """The whole scrape: this machine's processes summed, then the states."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(_MULTIPROCESS_DIR))
    registry.register(StateCollector())
    return generate_latest(registry)


# ---------------------------------------------------------------- who may scrape


@lru_cache(maxsize=8)
def _networks(allow: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(n, strict=False) for n in allow)


def _allowed_by_network(request) -> bool:
    allow = tuple(settings.METRICS_ALLOW)
    if not allow:
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in _networks(allow))


def _refusal(request):
    """None when the caller may scrape; else the error: 401 (a token is configured, the caller's is
    missing or wrong), 403 (not an allowed network, or nothing configured: never public)."""
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        if hmac.compare_digest(header[7:].encode(), token.encode()):
            return None
        return NotAuthenticated("The metrics token is wrong.")
    if _allowed_by_network(request):
        return None
    if token:
        return NotAuthenticated("Send the metrics token: Authorization: Bearer <METRICS_TOKEN>.")
    return PermissionDenied("Metrics are not open to this address (set METRICS_TOKEN or METRICS_ALLOW).")


def _respond(request):
    if request.method != "GET":
        refused: ApplicationError | None = ApplicationError(
            "Metrics are read with GET.", code="method_not_allowed", status=405
        )
    else:
        refused = _refusal(request)
    if refused is not None:
        rendered = render(refused, context=f"{request.method} {request.path}")
        response = JsonResponse(rendered.body, status=rendered.status)
        if rendered.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        elif rendered.status == 405:
            response["Allow"] = "GET"
        return response
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


async def metrics_view(request):
    return await sync_to_async(_respond)(request)
