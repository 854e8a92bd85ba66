"""Where Achilles adjusts a library it runs under, each with a test that the adjusted part exists and
behaves as relied on in the pinned version (``tests/achilles/unit/test_compat.py``).

daphne's HTTP requests are Twisted ``http.Request`` objects, which by default parse every
``multipart/form-data`` POST into ``request.args`` before the ASGI application sees it — a second
copy of an upload in memory that daphne never uses, and a malformed body (``--boundary--`` with no
parts) answered by Twisted itself with a bare 400, no body, no content type, bypassing the API's error
contract (found by ``make fuzz`` on ``POST /api/knowledge/documents``). Twisted's public
``parsePOSTFormSubmission=False`` turns that off; daphne does not pass it, so its request class gets it
as a default here, once per process, when the ASGI application is imported (``achilles/asgi.py``).
"""

from __future__ import annotations

from typing import Any

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
