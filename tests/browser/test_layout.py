"""Layout: every page at 375 px without horizontal scroll, dark mode from the system setting, and a
home page that leads somewhere."""

import pytest
from playwright.sync_api import expect

from achilles.models import Notification
from agents.services import agent_create
from conversations.models import Conversation, Message
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.p1]

WIDE_ANSWER = (
    "| "
    + " | ".join(f"колонка{i}" for i in range(12))
    + " |\n|"
    + "---|" * 12
    + "\n| "
    + " | ".join(str(i) for i in range(12))
    + " |\n\n```\n"
    + "x" * 400
    + "\n```\n\n"
    + "https://example.com/"
    + "a" * 300
    + " [1]"
)


WIDER = (
    "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 376)"
    ".slice(0, 5).map(e => e.tagName + '.' + e.className)"
)


def _seed(user):
    conversation = Conversation.objects.create(user=user, title="Очень длинное название беседы " * 4)
    Message.objects.create(conversation=conversation, role="user", content="Покажи таблицу " + "б" * 200)
    author = type(user).objects.create(username="hr-author", email="hr@example.com", first_name="Анна")
    hint = {
        "text": "Есть закрытые для вас материалы: источник «hr».",
        "sources": [
            {"source_system": "hr", "contact": {"user_id": author.pk, "username": "hr-author", "name": "Анна"}}
        ],
    }
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=WIDE_ANSWER + "\n\n" + hint["text"],
        model="builtin-extractive",
        tokens_used=584,
        withheld_hint=hint,
    )
    agent_create(owner=user, name="Сводка " * 10, schedule={"type": "interval", "every_minutes": 90})
    return conversation


def test_375px_pages_have_no_horizontal_scroll(live_url, page, user_factory, model_factory):
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-narrow")
    conversation = _seed(user)
    page.set_viewport_size({"width": 375, "height": 812})
    sign_in(page, live_url, user.username)
    for path in ["/", f"/chat/?c={conversation.pk}", "/knowledge/", "/agents/", "/tokens/"]:
        page.goto(live_url + path)
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, (path, width, page.evaluate(WIDER))
    # the chat: the conversation list collapses behind a toggle, the answer is all there
    page.goto(live_url + f"/chat/?c={conversation.pk}")
    page.wait_for_selector(".msg.assistant[data-id]")
    assert page.is_hidden("#threads") and page.is_visible("#threads-toggle")
    page.click("#threads-toggle")
    assert page.is_visible("#threads")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    # the withheld hint: a notice of its own (not in the answer), with a real request-access path:
    # a request to the named author, answered in place (their notice: tests/conversations/api/test_access_requests.py)
    assert "закрытые" not in page.locator(".msg.assistant .text").text_content()
    request = page.locator(".msg.assistant .withheld button.request-access")
    assert request.text_content() == "Запросить доступ (автор: Анна)"
    request.click()
    expect(page.locator(".msg.assistant .withheld [role=status]")).to_have_text(
        "Запрос отправлен: Анна получит уведомление."
    )
    assert request.is_disabled()
    assert Notification.objects.get(user__username="hr-author").kind == "access_request"
    # asked again after a reload: the API's refusal, in place
    page.reload()
    page.locator(".msg.assistant .withheld button.request-access").click()
    expect(page.locator(".msg.assistant .withheld [role=status]")).to_contain_text("уже отправлен")
    # Russian plurals on the token count
    assert "584 токена" in page.locator(".msg.assistant .meta").text_content()


def test_dark_mode_follows_the_system_setting(live_url, page, user_factory):
    user = user_factory(username="browser-dark")
    sign_in(page, live_url, user.username)
    page.emulate_media(color_scheme="dark")
    page.goto(live_url + "/chat/")
    dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.emulate_media(color_scheme="light")
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    luminance = lambda rgb: sum(int(x) for x in rgb[rgb.index("(") + 1 : -1].split(",")[:3])  # noqa: E731
    assert luminance(dark) < 150 < luminance(light)


def test_home_leads_to_recent_conversations_and_agents(live_url, page, user_factory, model_factory):
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-home")
    conversation = _seed(user)
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/")
    link = page.locator("#recent-conversations a").first
    assert link.get_attribute("href") == f"/chat/?c={conversation.pk}"
    assert "Сводка" in page.text_content("#my-agents") and "по расписанию" in page.text_content("#my-agents")
    page.click("text=Новый чат")
    page.wait_for_url("**/chat/")
