"""The hub's page for people (``/hub/``): server-rendered shell; everything it shows and does goes
through the hub's REST API (``hub/api.py`` → ``hub.selectors`` / ``hub.services``), the same routes
scripts and MCP's twins use — no second implementation."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as PageForbidden
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from achilles.errors import PermissionDenied
from hub.models import COMMAND_STATE_CHOICES
from hub.permissions import hub_access_check

# The page's words for the API's values (one language per page).
BATCH_STATE_RU = {
    "queued": _("в очереди"),
    "running": _("выполняется"),
    "done": _("выполнен"),
    "failed": _("ошибка"),
    "cancelled": _("отменён"),
    "partial": _("выполнен частично"),
}
COMMAND_STATE_RU = dict(COMMAND_STATE_CHOICES)
COMMAND_TYPE_RU = {
    "ensure_issue": _("задача"),
    "ensure_fields": _("поля"),
    "ensure_link": _("связь"),
    "ensure_sprint": _("спринт"),
    "ensure_comment": _("комментарий"),
    "ensure_transition": _("переход"),
    "refresh": _("обновление из Jira"),
}


@login_required
def hub_page(request):
    # Without hub.use_hub: a 403 page, as the REST routes answer 403.
    try:
        hub_access_check(request.user)
    except PermissionDenied as exc:
        raise PageForbidden(str(exc)) from exc
    return render(
        request,
        "hub.html",
        {"labels": {"batch": BATCH_STATE_RU, "command": COMMAND_STATE_RU, "type": COMMAND_TYPE_RU}},
    )
