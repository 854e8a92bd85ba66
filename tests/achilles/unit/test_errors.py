"""The one renderer of domain errors (issue 11, item 1; issue 10, finding 8)."""

import kombu.exceptions
import pytest
import redis.exceptions

from achilles import errors

pytestmark = [pytest.mark.unit]


def test_a_domain_error_renders_its_status_code_and_message():
    rendered = errors.render(errors.Conflict("the agent already has a run", code="already_running"))
    assert rendered == errors.Rendered(409, {"detail": "the agent already has a run", "code": "already_running"})


def test_a_field_error_renders_the_location_the_transport_gives():
    exc = errors.ValidationFailed("invalid cursor", field="cursor")
    assert errors.render(exc).body["detail"] == [
        {"loc": ["body", "cursor"], "msg": "invalid cursor", "type": "value_error"}
    ]
    located = errors.render(exc, locate=lambda field: ["query", field])
    assert located.status == 422 and located.body["detail"][0]["loc"] == ["query", "cursor"]


def test_the_text_rendering_for_text_only_transports():
    assert (
        errors.render_text(errors.NotFound("record not found", code="record_not_found"))
        == "record_not_found: record not found"
    )
    assert (
        errors.render_text(errors.ValidationFailed("must not be empty", field="name"))
        == "validation_error (name): must not be empty"
    )
    assert (
        errors.render_text(RuntimeError("secret stack detail")) == "internal_error: Internal error; it has been logged."
    )


def test_a_crash_is_the_one_logged_500_and_leaks_nothing(caplog):
    rendered = errors.render(RuntimeError("password=hunter2"), context="GET /api/x")
    assert rendered == errors.Rendered(500, {"detail": errors.INTERNAL_ERROR_DETAIL, "code": "internal_error"})
    assert "GET /api/x" in caplog.text


def test_redis_away_is_a_503_with_a_code_not_a_crash():
    cache = errors.render(redis.exceptions.ConnectionError("Connection refused"))
    broker = errors.render(kombu.exceptions.OperationalError("Error 111 connecting"))
    assert (cache.status, cache.body["code"]) == (503, "cache_unavailable")
    assert (broker.status, broker.body["code"]) == (503, "broker_unavailable")
