"""Plain views of the platform core."""

from __future__ import annotations

import sys

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views import defaults
from django.views.decorators.http import require_GET

from achilles import services
from achilles.errors import ApplicationError
from achilles.health import health_report
from achilles.middleware import unavailable_response
from achilles.models import ApiToken


@require_GET
def healthz(request):
    ok, report = health_report()
    return JsonResponse(report, status=200 if ok else 503)


def server_error(request):
    """``handler500``: Django calls it while handling the exception, so ``sys.exc_info()`` is that
    exception. PostgreSQL or Redis away (raised by a middleware: a session to save, a user to load)
    is the platform's 503; anything else Django's own 500 page."""
    exc = sys.exc_info()[1]
    return (unavailable_response(request, exc) if exc is not None else None) or defaults.server_error(request)


@login_required
def tokens_page(request):
    """Personal API tokens: list, create (the secret is shown once), revoke."""
    created_secret = None
    if request.method == "POST":
        if "revoke" in request.POST:
            try:
                services.api_token_revoke(user=request.user, token_id=int(request.POST["revoke"]))
                messages.success(request, "Токен отозван.")
            except (ApplicationError, ValueError):
                messages.error(request, "Токен не найден.")
            return redirect("tokens")
        name = (request.POST.get("name") or "")[:100]
        try:
            _, created_secret = services.api_token_create(user=request.user, name=name)
        except ApplicationError:  # empty, or only invisible characters
            messages.error(request, "Укажите название токена (видимыми символами).")
    tokens = ApiToken.objects.filter(user=request.user)
    return render(
        request,
        "tokens.html",
        {"tokens": tokens, "created_secret": created_secret, "user_timezone": request.user.effective_timezone()},
    )
