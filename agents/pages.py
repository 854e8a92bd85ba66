"""Server-rendered agents page; everything it does goes through the agents REST API."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render


@login_required
def agents_page(request):
    return render(request, "agents.html")
