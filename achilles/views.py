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
