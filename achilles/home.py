"""The home page: recent conversations and the user's agents (wiring — it composes the feature apps'
selectors, so the layers contract lists it with the URLs and settings, not with the core)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from agents.pages import AGENT_STATUS_RU
from agents.selectors import active_run_states, agent_list_for_owner
from conversations.selectors import conversation_list_for_user


@login_required
def home(request):
    """After sign-in: recent conversations, the user's agents, a way into the chat."""
    conversations = conversation_list_for_user(user=request.user, limit=5).items
    agents = list(agent_list_for_owner(user=request.user)[:5])
    active = active_run_states([a.pk for a in agents])
    return render(
        request,
        "home.html",
        {
            "conversations": conversations,
            "agents": [{"agent": a, "status": AGENT_STATUS_RU.get(a.status(active.get(a.pk)), "")} for a in agents],
            "user_timezone": request.user.effective_timezone(),
        },
    )
