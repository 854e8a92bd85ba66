"""Where a web process's CPU goes, from py-spy's collapsed stacks (``py-spy record --format raw``).

Each sample is charged to one layer: the innermost frame of the stack whose file belongs to a layer
below (generic helpers — ``django/utils``, ``functools``, ``contextlib`` … — are skipped, so their
time goes to whoever called them). Middleware is charged class by class (the class of the innermost
middleware frame: its own work, not the rest of the chain it calls). ``bench/http`` prints the table
for its ``BENCH_HTTP_PROFILE=1`` runs; ``python -m bench._stacks FILE…`` prints it for any profile.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

# (layer, path fragments) — the first layer whose fragment is in a frame's file wins for that frame.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "database: psycopg, the pool, Django's backend",
        (
            "psycopg",
            "django/db/backends",
            "django/db/utils.py",
            "achilles/dbguard.py",
            "achilles/prepared.py",
            "achilles/postgres/",
            "achilles/rawsql.py",
        ),
    ),
    ("database: ORM (query building, model instances)", ("django/db/models", "django/db/transaction.py")),
    ("Redis (the cache)", ("redis/", "django/core/cache", "achilles/cache.py")),
    (
        "JSON and the response schema (pydantic)",
        ("json/", "pydantic", "ninja/renderers.py", "ninja/schema.py", "ninja/responses.py"),
    ),
    ("ninja: routing, auth hooks, parameters", ("ninja/",)),
    (
        "middleware",
        (
            "achilles/middleware.py",
            "achilles/metrics.py",
            "achilles/inline_middleware.py",
            "django/middleware/",
            "django/contrib/sessions/",
            "django/contrib/auth/",
            "django/contrib/messages/",
            "allauth/",
            "axes/",
            "csp/",
            "whitenoise/",
            "django/utils/translation/",
            "django/utils/deprecation.py",
            "prometheus_client/",
        ),
    ),
    ("Django's handler: the ASGI request, the chain's glue, signals", ("django/core/handlers/", "django/dispatch/")),
    ("Django's URL resolution", ("django/urls/",)),
    ("Django's request and response objects (headers, cookies, body)", ("django/http/", "django/core/signals.py")),
    (
        "thread hops (sync_to_async: executor, wake-ups)",
        ("asgiref/", "concurrent/futures/", "threading.py", "queue.py"),
    ),
    ("the view and the platform's code", ("achilles/", "conversations/", "knowledge/", "agents/", "usage/", "hub/")),
    (
        "server: daphne, Twisted, HTTP parsing",
        ("daphne/", "twisted/", "channels/", "autobahn/", "uvicorn/", "h11/", "starlette/", "fastapi/", "anyio/"),
    ),
    ("event loop (asyncio)", ("asyncio/", "selectors.py")),
)


def _file(frame: str) -> str:
    # "Class.method (path/to/file.py:123)"
    return frame.rsplit(" (", 1)[1].rsplit(":", 1)[0] if " (" in frame else ""


def _layer(frame: str) -> str | None:
    path = _file(frame)
    for layer, fragments in LAYERS:
        if any(fragment in path for fragment in fragments):
            return layer
    return None


def _middleware_class(frames: list[str], index: int) -> str:
    """The middleware whose own work the frame at ``index`` is: the nearest enclosing frame of a
    ``…Middleware`` class (``SecurityMiddleware.process_response``, ``AccountMiddleware.<locals>…``),
    or the hooks' glue of ``InlineHooks`` / ``MiddlewareMixin`` itself."""
    for frame in reversed(frames[: index + 1]):
        name = frame.rsplit(" (", 1)[0]
        if name.startswith(("InlineHooks.", "MiddlewareMixin.")):
            return "hooks' glue (InlineHooks / MiddlewareMixin)"
        head = name.split(".")[0]
        if head.endswith("Middleware") or head == "fix_request_files_middleware":
            return head
    return Path(_file(frames[index])).stem


def breakdown(lines: list[str]) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    """(samples, samples per layer, samples per middleware class)."""
    layers: collections.Counter[str] = collections.Counter()
    middleware: collections.Counter[str] = collections.Counter()
    total = 0
    for line in lines:
        line = line.rstrip()
        if not line.strip():
            continue
        stack, count_text = line.rsplit(" ", 1)  # a stack py-spy could not read is empty: "other"
        count = int(count_text)
        total += count
        frames = stack.split(";")
        for index in range(len(frames) - 1, -1, -1):
            layer = _layer(frames[index])
            if layer is not None:
                layers[layer] += count
                if layer == "middleware":
                    middleware[_middleware_class(frames, index)] += count
                break
        else:
            layers["other"] += count
    return total, layers, middleware


def report(path: Path, cpu_ms: float | None = None) -> str:
    """The breakdown of one profile as text; with the measured CPU per request, in ms too."""
    total, layers, middleware = breakdown(path.read_text().splitlines())
    if not total:
        return f"{path.name}: no samples"

    def row(name: str, samples: int, indent: str = "") -> str:
        share = samples / total
        ms = f"  {share * cpu_ms:5.2f} ms" if cpu_ms is not None else ""
        return f"  {indent}{name:<{62 - len(indent)}}{share * 100:5.1f} %{ms}"

    out = [f"{path.name}: {total} samples (the thread holding the GIL)"]
    for layer, samples in layers.most_common():
        out.append(row(layer, samples))
        if layer == "middleware":
            out += [row(name, n, "  ") for name, n in middleware.most_common()]
    return "\n".join(out)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(report(Path(name)))
