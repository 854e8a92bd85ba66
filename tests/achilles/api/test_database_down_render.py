"""PostgreSQL away is the platform's 503 wherever it is raised (issue 10's probe: 500 after 10 s).

The end-to-end case — PostgreSQL really stopped, every kind of route within a second — is
``tests/faults/test_postgres_down.py``. Here the two renderers a page's or a middleware's failure goes
through, with the very exception Django raises when the pool gives up, and a query's own failure
that must stay the logged 500."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, OperationalError
from django.test import RequestFactory
from psycopg_pool import PoolTimeout

from achilles import views
from achilles.middleware import ServiceUnavailableMiddleware

pytestmark = [pytest.mark.api]


def raised(exc: BaseException, cause: BaseException) -> BaseException:
    try:
        raise exc from cause
    except BaseException as caught:
        return caught


def pool_gave_up() -> BaseException:
    return raised(OperationalError("couldn't get a connection"), PoolTimeout("couldn't get a connection"))


def test_a_page_whose_view_finds_no_database_answers_the_html_503():
    middleware = ServiceUnavailableMiddleware(lambda request: None)

    response = middleware.process_exception(RequestFactory().get("/agents/"), pool_gave_up())

    assert response.status_code == 503 and response["Content-Type"].startswith("text/html")
    assert "database_unavailable" in response.content.decode() and response["Retry-After"] == "5"


def test_an_api_route_whose_middleware_finds_no_database_answers_the_json_503():
    # Django calls handler500 inside its except block: sys.exc_info() is the exception
    request = RequestFactory().get("/api/me")
    try:
        raise pool_gave_up()
    except OperationalError:
        response = views.server_error(request)

    assert response.status_code == 503 and response["Content-Type"] == "application/json"
    assert json.loads(response.content)["code"] == "database_unavailable"


def test_a_query_s_own_failure_stays_the_500():
    request = RequestFactory().get("/agents/")
    assert ServiceUnavailableMiddleware(lambda r: None).process_exception(request, IntegrityError("dup")) is None
    try:
        raise IntegrityError("duplicate key")
    except IntegrityError:
        response = views.server_error(request)
    assert response.status_code == 500
