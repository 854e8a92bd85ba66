"""Server-rendered agents page; everything it does goes through the agents REST API."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone

from agents.selectors import owner_over_budget

# The page's words for the API's status and run values (one language per page).
AGENT_STATUS_RU = {
    "paused_by_admin": "приостановлен администратором",
    "disabled": "выключен",
    "no_model": "нет модели",
    "running": "выполняется",
    "queued": "в очереди",
    "scheduled": "по расписанию",
    "manual_only": "вручную",
}
RUN_STATE_RU = {
    "queued": "в очереди",
    "running": "выполняется",
    "succeeded": "выполнен",
    "failed": "ошибка",
    "skipped": "пропущен",
}
RUN_REASON_RU = {
    "already_running": "предыдущий запуск ещё идёт",
    "budget_exceeded": "недельный бюджет токенов исчерпан",
    "gate_closed": "агент выключен или приостановлен до старта",
    "iteration_cap": "достигнут предел шагов",
    "stale": "исполнитель перестал отвечать",
    "worker_lost": "исполнитель остановился",
    "token_cap": "достигнут предел токенов на запуск",
    "model_error": "модель недоступна",
    "error": "внутренняя ошибка",
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
