"""Server-rendered agents page; everything it does goes through the agents REST API."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agents.selectors import owner_over_budget

# The page's words for the API's status and run values (one language per page).
AGENT_STATUS_RU = {
    "paused_by_admin": _("приостановлен администратором"),
    "disabled": _("выключен"),
    "no_model": _("нет модели"),
    "running": _("выполняется"),
    "queued": _("в очереди"),
    "scheduled": _("по расписанию"),
    "manual_only": _("вручную"),
}
RUN_STATE_RU = {
    "queued": _("в очереди"),
    "running": _("выполняется"),
    "succeeded": _("выполнен"),
    "failed": _("ошибка"),
    "skipped": _("пропущен"),
}
RUN_REASON_RU = {
    "already_running": _("предыдущий запуск ещё идёт"),
    "budget_exceeded": _("недельный бюджет токенов исчерпан"),
    "gate_closed": _("агент выключен или приостановлен до старта"),
    "iteration_cap": _("достигнут предел шагов"),
    "stale": _("исполнитель перестал отвечать"),
    "worker_lost": _("исполнитель остановился"),
    "token_cap": _("достигнут предел токенов на запуск"),
    "model_error": _("модель недоступна"),
    "error": _("внутренняя ошибка"),
}


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
