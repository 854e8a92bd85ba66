"""API authentication (PLAT-7): a session or a personal Bearer token."""

from __future__ import annotations

from ninja.security import HttpBearer, SessionAuth

from achilles.services import api_token_authenticate


class SessionCookieAuth(SessionAuth):
    """The browser session. CSRF is checked only when a session cookie is present: a request
    without one (a script with a Bearer token, or nobody) cannot ride on ambient credentials,
    and must get 401 rather than a CSRF 403."""

    def _get_key(self, request):
        if self.param_name not in request.COOKIES:
            return None
        return super()._get_key(request)


class BearerTokenAuth(HttpBearer):
    """``Authorization: Bearer ach_…`` — a personal API token."""

    def authenticate(self, request, token):
        user = api_token_authenticate(token)
        if user is not None:
            request.user = user
        return user


def authenticate_request(request):
    """The user behind a plain Django request (session or Bearer), or None. For non-ninja views."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return user
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return api_token_authenticate(header[7:].strip())
    return None


# Bearer first: an explicit token wins over a cookie that happens to ride along.
api_auth = [BearerTokenAuth(), SessionCookieAuth()]
