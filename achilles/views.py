"""Plain views of the platform core."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from achilles.health import health_report


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
    from django.contrib import messages
    from django.shortcuts import redirect

    from achilles import services
    from achilles.errors import ApplicationError
    from achilles.models import ApiToken

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
    return render(request, "tokens.html", {"tokens": tokens, "created_secret": created_secret})
