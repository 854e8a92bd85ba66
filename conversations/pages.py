"""The server-rendered chat pages (thin clients of the websocket and the conversations API)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext_noop
from django.views.decorators.csrf import ensure_csrf_cookie


@dataclass(frozen=True)
class ExampleQuestion:
    """A first question for an empty chat, answered by an open document of the demo corpus."""

    text: str  # in the catalog: an English page asks it in English (the embedder reads both)
    source: str  # the demo corpus document that answers it (knowledge/demo_corpus/…)
    fact: str  # the words of that document the answer rests on (checked by a unit test)


EXAMPLE_QUESTIONS = (
    ExampleQuestion(gettext_noop("Сколько дней отпуска положено в год?"), "hr/otpusk.md", "28 календарных дней"),
    ExampleQuestion(
        gettext_noop("Сколько дней в неделю можно работать из дома?"), "hr/udalyonka.md", "до 3 дней в неделю"
    ),
    ExampleQuestion(
        gettext_noop("За сколько дней подавать заявку на командировку?"),
        "hr/komandirovki.md",
        "за 5 рабочих дней до поездки",
    ),
)


@login_required
@ensure_csrf_cookie
def chat_page(request):
    return render(request, "chat.html", {"examples": EXAMPLE_QUESTIONS})


@login_required
@ensure_csrf_cookie
def shared_page(request, conversation_id):
    """A thread a colleague shared, read-only (the data comes from ``GET /api/shared/{id}``)."""
    return render(request, "shared.html", {"conversation_id": conversation_id})
