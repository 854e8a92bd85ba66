"""Every page of the web app, as `demo` and as `admin`, with content (the demo data, a long thread
with sources and a withheld hint, agents with a run history, a batch, a token, a notice):

- at 375 px nothing is wider than the screen, no page is taller than its content needs, no form
  field is hidden, and the chat opens at the latest message with the message field in view;
- axe-core finds no violation of serious or critical impact, in the light theme and the dark one,
  at 1366 px and at 375 px, and with the bell's panel open (a notice in it).

One walk does both, two loads a page (the layout on the light load at 375 px): a walk of its own for
the layout loaded every page a third time.
"""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from achilles.models import Notification, User
from achilles.security import DEMO_ACCOUNTS
from achilles.services import api_token_create
from agents.models import AgentRun
from agents.services import agent_create
from conversations.models import Citation, Conversation, Message
from conversations.services import conversation_share_add
from hub import services as hub_services
from tests.browser.conftest import sign_in
from tests.browser.pagecheck import CHAT_AT_LATEST_JS, axe_violations, layout_problems

pytestmark = [pytest.mark.browser, pytest.mark.p1]

ANSWER = (
    "Ежегодный оплачиваемый отпуск составляет 28 календарных дней [1]. Заявление подают за две недели до "
    "начала отпуска [1], его можно разделить на части по согласованию с руководителем [2].\n\n"
    "| что | условие |\n|---|---|\n| заявление | за две недели [1] |\n| перенос | по согласованию [2] |\n\n"
    "```\nhr vacation apply --days 28 --from 2026-12-21 --comment «новогодние праздники»\n```"
)
RUN_OUTPUT = (
    "Сводка за неделю: закрыто 14 задач проекта AURORA, в работе 6, просрочено 2 (AURORA-9004, AURORA-9011) [1]. "
    "Риски: сверка платежей с банком задерживается на три дня из-за расхождений по эквайрингу [2]. "
) * 3


def _thread(user: User, author: User) -> Conversation:
    conversation = Conversation.objects.create(user=user, title="Отпуск и перенос отпуска: правила и сроки подачи")
    for n in range(10):
        Message.objects.create(
            conversation=conversation, role="user", content=f"Вопрос {n + 1}: сколько дней отпуска и как его перенести?"
        )
        answer = Message.objects.create(
            conversation=conversation,
            role="assistant",
            content=ANSWER,
            model="builtin-extractive",
            tokens_used=400 + n,
        )
        Citation.objects.create(
            message=answer,
            rank=1,
            markers=[1],
            title="Положение об отпусках",
            url="https://wiki.example.com/hr/vacation",
            source_system="web",
            chunk_text="Ежегодный оплачиваемый отпуск составляет 28 календарных дней.",
        )
        Citation.objects.create(message=answer, rank=2, markers=[2], record_id=10**9, source_system="files")
    hint = {
        "text": "Есть закрытые для вас материалы: источник «hr».",
        "sources": [
            {
                "source_system": "hr",
                "contact": {"user_id": author.pk, "username": author.username, "name": author.first_name},
            }
        ],
    }
    Message.objects.create(conversation=conversation, role="user", content="А что с больничным во время отпуска?")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Отпуск продлевается на дни болезни [1].\n\n" + hint["text"],
        model="builtin-extractive",
        tokens_used=512,
        withheld_hint=hint,
    )
    return conversation


def _agents(user: User) -> None:
    agent = agent_create(
        owner=user,
        name="Еженедельная сводка по проекту AURORA",
        instructions="Собери сводку по задачам.",
        schedule={"type": "calendar", "weekday": 0, "time": "09:30"},
    )
    now = timezone.now()
    for n in range(5):
        AgentRun.objects.create(
            agent_id=agent.id,
            trigger="scheduled",
            state="succeeded",
            output=RUN_OUTPUT,
            tokens_used=1800 + n,
            started_at=now - timedelta(days=7 * n, minutes=1),
            finished_at=now - timedelta(days=7 * n),
        )
    AgentRun.objects.create(
        agent_id=agent.id,
        trigger="manual",
        state="failed",
        reason="model_error",
        error="Модель не ответила за 120 с.",
        finished_at=now - timedelta(days=40),
    )


def _content() -> dict[str, tuple[str, int, str | None]]:
    """The demo data, and per demo account: its long thread's id, its batch's id and the id of a
    thread shared with it (admin's with demo)."""
    call_command("demo_data", stdout=io.StringIO())
    author = User.objects.create(username="hr-author", email="hr@example.com", first_name="Анна")
    threads, batches = {}, {}
    for user in User.objects.filter(username__in=["demo", "admin"]):
        threads[user.username] = _thread(user, author).pk
        _agents(user)
        api_token_create(user=user, name="ноутбук")
        Notification.objects.create(
            user=user, kind="agent_run", title="Агент «Еженедельная сводка» завершил запуск", link="/agents/"
        )
        batches[user.username] = hub_services.batch_create(
            user=user,
            title="Комментарий к сверке платежей",
            commands=[{"type": "ensure_comment", "key": "AURORA-9001", "body": "Проверено на стенде."}],
        ).id
    # admin's long thread shared with demo: demo's pages include the read-only page of a shared thread
    conversation_share_add(user=User.objects.get(username="admin"), conversation_id=threads["admin"], username="demo")
    shared = {"demo": str(threads["admin"])}
    return {username: (threads[username], batches[username], shared.get(username)) for username in threads}


def _pages(username: str, content: tuple[str, int, str | None]) -> list[str]:
    thread, batch, shared = content
    pages = ["/", f"/chat/?c={thread}", "/chat/", "/knowledge/", "/agents/", f"/hub/?issue=AURORA-9001&batch={batch}"]
    pages += ["/tokens/", "/usage/me/", "/settings/"]
    if shared:
        pages.append(f"/chat/shared/{shared}/")
    if username == "admin":
        pages += ["/usage/", "/admin/", "/admin/agents/agent/"]
    return pages


def _listed(found: dict[str, list[str]]) -> str:
    return "\n" + "\n".join(f"{where}:\n  " + "\n  ".join(lines) for where, lines in found.items())


def _sign_in_as(page, live_url: str, username: str) -> None:
    page.context.clear_cookies()
    sign_in(page, live_url, username, DEMO_ACCOUNTS[username])


def _open(page, url: str) -> None:
    page.goto(url)
    if "/hub/" not in url:  # the hub page follows its open batch with a long poll: never idle
        page.wait_for_load_state("networkidle")
    if "/chat/?c=" in url:
        expect(page.locator("#log .msg.assistant[data-id]").last).to_be_visible()
    if "/agents/" in url and "/admin/" not in url:
        expect(page.locator(".agent .run").first).to_be_visible()
    if "/hub/" in url:
        expect(page.locator("#card-h")).to_contain_text("AURORA-9001")
        expect(page.locator("#batches li.batch").first).to_be_visible()
        expect(page.locator("#batch-commands li.command").first).to_be_visible()
        expect(page.locator("#issues li.issue").first).to_be_visible()
        expect(page.locator("#agent-lines")).not_to_contain_text("Загрузка")


def test_the_chat_opens_at_the_latest_message_with_the_input_in_view(live_url, page):
    content = _content()
    page.set_viewport_size({"width": 375, "height": 812})
    _sign_in_as(page, live_url, "demo")
    page.goto(live_url + f"/chat/?c={content['demo'][0]}")
    expect(page.locator("#log .msg.assistant[data-id]")).to_have_count(11)
    expect(page.locator("#log .withheld")).to_be_visible()
    state = page.evaluate(CHAT_AT_LATEST_JS)
    # the page is the screen; the log scrolls inside it and starts at its end
    assert state["pageHeight"] <= state["viewport"] + 1, state
    assert state["logScrolls"] and state["logAtEnd"] and state["lastInView"], state
    assert state["inputInView"] and state["scrollY"] == 0, state
    # and a thread opened from the list lands the same way
    page.click("#threads-toggle")
    page.locator("#threads .thread a").first.click()
    expect(page.locator("#log .msg.assistant[data-id]")).to_have_count(11)
    state = page.evaluate(CHAT_AT_LATEST_JS)
    assert state["logAtEnd"] and state["inputInView"], state


DESKTOP, PHONE = {"width": 1366, "height": 900}, {"width": 375, "height": 812}


def _bell(page, *, open_it: bool) -> bool:
    """Open (and wait for its notices) or close the bell's panel; False on a page without the bell
    (the admin)."""
    button = page.locator("#bell-button")
    if not button.count():
        return False
    if (button.get_attribute("aria-expanded") == "true") != open_it:
        button.click()
    if open_it:
        expect(page.locator("#bell-list li").first).to_be_visible()
    else:
        expect(page.locator("#bell-panel")).to_be_hidden()
    return True


def _walk_the_page(page, url: str, where: str) -> tuple[list[str], dict[str, list[str]]]:
    """One page as a person meets it, two loads (one sign-in per account covers all its pages):
    its layout problems at 375 px, and axe-core's violations in both themes at both widths.

    - Light: the page opens on a phone (375 px), is checked for layout, then axe runs with the
      bell's panel opened over it (axe reads the whole page, under the panel too); the panel is
      closed and the window widened to 1366 px for axe again.
    - Dark: the page opens at 1366 px (as people load it: switched live, the admin's stylesheet
      keeps light colours on parts of a dark page until a reload), axe runs, then narrowed live to
      375 px, the panel opened, axe again.
    """
    found = {}

    def check(label: str) -> None:
        violations = axe_violations(page)
        if violations:
            found[f"{where} {label}"] = violations

    page.emulate_media(color_scheme="light")
    page.set_viewport_size(PHONE)
    _open(page, url)
    layout = layout_problems(page)
    bell = _bell(page, open_it=True)
    check(f"light 375{' bell open' if bell else ''}")
    _bell(page, open_it=False)
    page.set_viewport_size(DESKTOP)
    check("light 1366")

    page.emulate_media(color_scheme="dark")
    _open(page, url)
    check("dark 1366")
    page.set_viewport_size(PHONE)
    bell = _bell(page, open_it=True)
    check(f"dark 375{' bell open' if bell else ''}")
    return layout, found


@pytest.mark.timeout(600)  # 46 loads, 92 axe runs: 2.5 min on a busy machine, the live server first
def test_every_page_fits_375px_and_axe_finds_nothing_serious_light_and_dark_wide_narrow_and_with_the_bell_open(
    live_url, page
):
    # given: the demo data and content for both demo accounts
    content = _content()
    problems, violations = {}, {}
    for username in ("demo", "admin"):
        _sign_in_as(page, live_url, username)
        for path in _pages(username, content[username]):
            # when: the page opens on a phone and on a desktop, in the light theme and the dark one
            layout, found = _walk_the_page(page, live_url + path, f"{username} {path}")
            # then: nothing wider than the screen, no empty stretches, every field reachable
            if layout:
                problems[f"{username} {path}"] = layout
            # and axe finds nothing serious or critical
            violations.update(found)
    page.context.clear_cookies()
    layout, found = _walk_the_page(page, live_url + "/accounts/login/", "signed out /accounts/login/")
    if layout:
        problems["signed out /accounts/login/"] = layout
    violations.update(found)
    assert not problems, "layout at 375 px:" + _listed(problems)
    assert not violations, "axe:" + _listed(violations)
