"""API authentication (PLAT-7): a session or a personal Bearer token."""

from __future__ import annotations

from django.utils import translation
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
            token_person_set(request, user)
        return user


def token_person_set(request, user) -> None:
    """The person behind a token is the request's user. The language middleware ran before the token
    was read: the account's own language (settings page) wins over the client's Accept-Language here too."""
    request.user = user
    if user.language:
        translation.activate(user.language)
        request.LANGUAGE_CODE = translation.get_language()


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
