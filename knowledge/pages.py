"""The «Знания» page, server-rendered; everything it does goes through the knowledge REST API."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from knowledge.uploads.services import can_upload

# The page's words for the API's values (one language per page).
SOURCE_RU = {"uploads": "Файлы", "confluence": "Confluence", "jira": "Jira"}
STATE_RU = {
    "queued": "в очереди",
    "parsing": "разбирается",
    "indexed": "проиндексирован",
    "failed": "ошибка",
    "needs_ocr": "нужно распознавание (OCR)",
}


@login_required
def knowledge_page(request):
    user = request.user
    return render(
        request,
        "knowledge.html",
        {
            "can_upload": can_upload(user),
            "labels": {
                "source": SOURCE_RU,
                "state": STATE_RU,
                "groups": sorted(user.groups.values_list("name", flat=True)),
                "me": user.pk,
                "staff": user.is_staff,
            },
        },
    )
