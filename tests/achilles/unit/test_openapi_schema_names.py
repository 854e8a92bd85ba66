"""Every schema the OpenAPI document names is one schema: two ninja schemas of the same class name
in two apps would share one component, and one route's answers would be documented by the other's
(make fuzz: the agents' runs list was checked against the connectors' ``RunOut``)."""

from __future__ import annotations

import pytest
from ninja import Schema

pytestmark = pytest.mark.unit


def _schemas_in_routes() -> dict[str, set[type]]:
    from achilles.api import api

    api.get_openapi_schema(path_prefix="/api")  # imports every router's schemas
    found: dict[str, set[type]] = {}
    stack = list(Schema.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] in {"achilles", "agents", "conversations", "hub", "knowledge", "usage"}:
            found.setdefault(cls.__name__, set()).add(cls)
    return found


def test_no_two_api_schemas_share_a_name():
    shared = {
        name: sorted(f"{c.__module__}.{c.__qualname__}" for c in classes)
        for name, classes in _schemas_in_routes().items()
        if len(classes) > 1
    }
    assert shared == {}
