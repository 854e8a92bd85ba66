"""Plain views of the platform core."""

from __future__ import annotations

import sys
import zoneinfo

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views import defaults
from django.views.decorators.http import require_GET

from achilles import selectors, services
from achilles.errors import ApplicationError
from achilles.health import health_report
from achilles.middleware import unavailable_response
from achilles.models import LANGUAGE_CHOICES


@require_GET
def favicon(request):
    """``/favicon.ico``, which browsers ask for on pages that name no icon (the admin, the API docs):
    the platform's icon rather than a 404 in every page's console."""
    return redirect(static("achilles/favicon.svg"))


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


class SignInView(auth_views.LoginView):
    """The sign-in page: a password form and a «Войти через …» button per OpenID Connect provider."""

    template_name = "registration/login.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["oidc_providers"] = [{"id": p.id, "name": p.name} for p in settings.OIDC_PROVIDERS]
        return context


@require_GET
def oidc_cancelled(request):
    """The provider's sign-in was cancelled: back to the sign-in page, saying so."""
    messages.info(request, _("Вход через провайдера отменён."))
    return redirect(settings.LOGIN_URL)


SOURCE_RU = {
    "local": gettext_lazy("локальная учётная запись"),
    "ldap": "LDAP / Active Directory",
    "oidc": "OpenID Connect",
}


@login_required
def settings_page(request):
    """«Настройки»: name, e-mail, time zone, language (the same write as ``PATCH /api/me``), where the account
    comes from and its groups (read-only; name and e-mail too when the directory owns them)."""
    user = request.user
    read_only = user.source != "local"
    if request.method == "POST":
        fields = ("timezone",) if read_only else ("first_name", "last_name", "email", "timezone")
        changes: dict = {f: request.POST.get(f, "") for f in fields}
        changes["notify_by_email"] = request.POST.get("notify_by_email") == "on"
        if "language" in request.POST:
            changes["language"] = request.POST["language"]
        try:
            services.user_profile_update(user=user, changes=changes)
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            # the message and the next page in the language just chosen
            translation.activate(user.language or translation.get_language_from_request(request))
            messages.success(request, _("Настройки сохранены."))
            return redirect("settings")
    return render(
        request,
        "settings.html",
        {
            "read_only": read_only,
            "source": SOURCE_RU.get(user.source, user.source),
            "groups": sorted(user.groups.values_list("name", flat=True)),
            "zones": sorted(zoneinfo.available_timezones()),
            "effective_timezone": user.effective_timezone(),
            "email_configured": settings.EMAIL_CONFIGURED,
            "languages": LANGUAGE_CHOICES,
        },
    )


@login_required
def tokens_page(request):
    """Personal API tokens: list, create (the secret is shown once), revoke."""
    created_secret = None
    if request.method == "POST":
        if "revoke" in request.POST:
            try:
                services.api_token_revoke(user=request.user, token_id=int(request.POST["revoke"]))
                messages.success(request, _("Токен отозван."))
            except (ApplicationError, ValueError):
                messages.error(request, _("Токен не найден."))
            return redirect("tokens")
        name = (request.POST.get("name") or "")[:100]
        try:
            _token, created_secret = services.api_token_create(user=request.user, name=name)
        except ApplicationError:  # empty, or only invisible characters
            messages.error(request, _("Укажите название токена (видимыми символами)."))
    tokens = selectors.api_token_list_for_user(user=request.user)
    return render(
        request,
        "tokens.html",
        {"tokens": tokens, "created_secret": created_secret, "user_timezone": request.user.effective_timezone()},
    )
