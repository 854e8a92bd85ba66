"""MCP error results use the platform's one text renderer: a domain error's code and message, a crash
generic (and logged), never its own text."""

from __future__ import annotations

import logging

from achilles.errors import NotFound, ValidationFailed
from hub.mcp.server import error_result


def test_a_domain_error_is_its_code_and_message():
    result = error_result(ValidationFailed("timeout_minutes must be more than 0 and at most 60 (got 61)"))
    assert result.is_error
    assert result.content[0].text == "validation_error: timeout_minutes must be more than 0 and at most 60 (got 61)"
    assert error_result(NotFound("batch 9 not found")).content[0].text == "not_found: batch 9 not found"


def test_a_crash_says_nothing_of_itself():
    logged: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = logged.append
    logger = logging.getLogger("achilles.errors")
    logger.addHandler(handler)
    try:
        result = error_result(RuntimeError("password=hunter2"), tool="issue")
    finally:
        logger.removeHandler(handler)
    assert result.is_error
    assert result.content[0].text == "internal_error: Internal error; it has been logged."
    # logged for the operator (with the tool), not shown to the client
    assert any(r.exc_info and "hunter2" in str(r.exc_info[1]) and "mcp issue" in r.getMessage() for r in logged)
