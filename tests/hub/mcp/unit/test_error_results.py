"""MCP error results use the platform's one text renderer: a domain error's code and message, a crash
generic (and logged), never its own text."""

from __future__ import annotations

from achilles.errors import NotFound, ValidationFailed
from hub.mcp.server import error_result


def test_a_domain_error_is_its_code_and_message():
    result = error_result(ValidationFailed("timeout_minutes must be more than 0 and at most 60 (got 61)"))
    assert result.is_error
    assert result.content[0].text == "validation_error: timeout_minutes must be more than 0 and at most 60 (got 61)"
    assert error_result(NotFound("batch 9 not found")).content[0].text == "not_found: batch 9 not found"


def test_a_crash_says_nothing_of_itself(caplog):
    result = error_result(RuntimeError("password=hunter2"), tool="issue")
    assert result.is_error
    assert result.content[0].text == "internal_error: Internal error; it has been logged."
    assert "hunter2" in caplog.text   # logged for the operator, not shown to the client
