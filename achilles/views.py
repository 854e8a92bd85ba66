"""Plain views of the platform core."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from achilles import services
from achilles.errors import ApplicationError
from achilles.health import health_report
from achilles.models import ApiToken


@require_GET
def healthz(request):
    ok, report = health_report()
    return JsonResponse(report, status=200 if ok else 503)


@login_required
def home(request):
    return render(request, "home.html")


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
        name = (request.POST.get("name") or "").strip()[:100]
        if not name:
            messages.error(request, "Укажите название токена.")
        else:
            _, created_secret = services.api_token_create(user=request.user, name=name)
    tokens = ApiToken.objects.filter(user=request.user)
    return render(request, "tokens.html", {"tokens": tokens, "created_secret": created_secret})
