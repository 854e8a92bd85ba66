"""The «Знания» page, server-rendered; everything it does goes through the knowledge REST API."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from knowledge.choices import DocumentState
from knowledge.source_labels import DEFAULT_LABELS, source_label_overrides
from knowledge.uploads.services import can_upload

# The page's words for the API's values (one language per page).
STATE_RU = dict(DocumentState.choices)


@login_required
def knowledge_page(request):
    user = request.user
    return render(
        request,
        "knowledge.html",
        {
            "can_upload": can_upload(user),
            "labels": {
                # sources by label (a connector's «confluence:3» by its kind's: the script's fallback)
                "source": {**{k: _(v) for k, v in DEFAULT_LABELS.items()}, **source_label_overrides()},
                "state": STATE_RU,
                "groups": sorted(user.groups.values_list("name", flat=True)),
                "me": user.pk,
                "staff": user.is_staff,
            },
        },
    )
