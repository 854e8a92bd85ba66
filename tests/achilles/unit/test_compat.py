"""The library adjustments of ``achilles.compat`` still fit the pinned versions (the behaviour itself,
through a real daphne: ``tests/achilles/integration/test_daphne_bodies.py``)."""

from __future__ import annotations

import contextlib
import inspect

import pytest
from daphne import http_protocol
from twisted.web import http

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
