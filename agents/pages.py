"""Server-rendered agents page; everything it does goes through the agents REST API."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone

from agents.choices import AgentStatus, RunReason, RunState
from agents.selectors import owner_over_budget

# The page's words for the API's status and run values (one language per page).
AGENT_STATUS_RU = dict(AgentStatus.choices)
RUN_STATE_RU = dict(RunState.choices)
RUN_REASON_RU = dict(RunReason.choices)


@login_required
def agents_page(request):
    return render(
        request,
        "agents.html",
        {
            "labels": {"status": AGENT_STATUS_RU, "state": RUN_STATE_RU, "reason": RUN_REASON_RU},
            "over_budget": owner_over_budget(owner=request.user, now=timezone.now()),
        },
    )
