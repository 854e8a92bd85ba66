"""The websockets' Origin check: the site's own origin — scheme, host and port — or one of
``CSRF_TRUSTED_ORIGINS``, nothing else.

A browser sends the session cookie with a websocket handshake from any page, so the Origin is the
only thing that tells the platform's own pages from another site's. Comparing the host alone
(channels' ``AllowedHostsOriginValidator``) let a page on another port or scheme of the same host
(``http://127.0.0.1:9999``, ``https://127.0.0.1``) read answers through the victim's cookie. The
rule is the one Django's CSRF middleware applies to unsafe requests, with the same settings.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

logger = logging.getLogger(__name__)

DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]  # (scheme, host, port), lower-case, default port filled in


def origin_parse(value: str) -> Origin | None:
    """``scheme://host[:port]`` → its normalized triple; anything else (``null``, a path, a bad
    port, another scheme) → None."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if (
        scheme not in DEFAULT_PORTS
        or not parts.hostname
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        return None
    return scheme, parts.hostname, port or DEFAULT_PORTS[scheme]


def _headers(scope) -> dict[str, str]:
    return {name.decode("latin1").lower(): value.decode("latin1") for name, value in scope.get("headers", [])}


def _is_secure(scope, headers: dict[str, str]) -> bool:
    """As ``HttpRequest.is_secure``: the proxy's header when configured and present, else the scheme."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        meta_name, secure_value = proxy
        header = meta_name.removeprefix("HTTP_").replace("_", "-").lower()
        if header in headers:
            return headers[header].split(",")[0].strip() == secure_value
    return scope.get("scheme") in ("wss", "https")


def site_origin(scope) -> Origin | None:
    """The origin the page that opened this socket was served from: the Host the browser sent
    (validated against ALLOWED_HOSTS, as Django does for every request) and the connection's scheme."""
    headers = _headers(scope)
    host = headers.get("host")
    if not host and scope.get("server"):
        server_host, server_port = scope["server"]
        host = f"{server_host}:{server_port}" if server_port else server_host
    if not host:
        return None
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS or ([".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed):
        return None
    return origin_parse(f"{'https' if _is_secure(scope, headers) else 'http'}://{host}")


def origin_trusted(origin: Origin, trusted: list[str]) -> bool:
    """``CSRF_TRUSTED_ORIGINS`` as Django reads it: exact origins, or ``scheme://*.domain`` for
    any subdomain."""
    scheme, host, port = origin
    for entry in trusted:
        if "*" in entry:
            parts = urlsplit(entry)
            netloc = host if port == DEFAULT_PORTS[scheme] else f"{host}:{port}"
            if parts.scheme.lower() == scheme and is_same_domain(netloc, parts.netloc.lower().lstrip("*")):
                return True
        elif origin_parse(entry) == origin:
            return True
    return False


def origin_allowed(scope) -> bool:
    raw = _headers(scope).get("origin")
    origin = origin_parse(raw) if raw else None
    if origin is None:
        return False
    return origin == site_origin(scope) or origin_trusted(origin, settings.CSRF_TRUSTED_ORIGINS)


async def _refuse(receive, send) -> None:
    """Refuse the handshake (the server answers HTTP 403) and end. channels' ``WebsocketDenier``
    is a consumer: it joined the channel layer and waited for the client to leave, holding an
    application and a Redis receive for every refused connect."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close"})


class SameOriginValidator:
    """ASGI middleware: a websocket handshake from any other origin is refused (HTTP 403)."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            logger.warning(
                "websocket refused: origin %r is not this site's (host %r)",
                _headers(scope).get("origin"),
                _headers(scope).get("host"),
            )
            return await _refuse(receive, send)
        return await self.application(scope, receive, send)
