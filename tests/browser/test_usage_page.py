"""«Расходы AI» in the browser: the admin sees the chart and the tables in both themes and at 375 px,
a user sees «Мои расходы», and a user without the permission gets 403 on the page and the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import Agent, AgentRun
from conversations.models import Conversation, Message
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.p1]


def _seed(user_factory, model_factory):
    model_factory(name="fake-chat", provider="builtin", is_default=True)
    admin = user_factory(username="usage-admin", is_staff=True)
    alice = user_factory(username="usage-alice", first_name="Алиса")
    now = timezone.now()
    thread = Conversation.objects.create(user=alice)
    for tokens, model in ((1200, "fake-chat"), (800, "gpt-large-model-name")):
        Message.objects.create(
            conversation=thread,
            role="assistant",
            content="ответ",
            model=model,
            tokens_used=tokens,
            input_tokens=tokens // 2,
            output_tokens=tokens - tokens // 2,
        )
    agent = Agent.objects.create(owner=alice, name="Еженедельная сводка по продажам и отгрузкам")
    AgentRun.objects.create(
        agent=agent,
        trigger="manual",
        state="succeeded",
        model="fake-chat",
        tokens_used=5000,
        started_at=now - timedelta(minutes=2),
        finished_at=now - timedelta(minutes=1),
    )
    return admin, alice


def _no_horizontal_scroll(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= 375


def test_admin_page_chart_and_tables_in_both_themes_and_at_375px(live_url, page, user_factory, model_factory):
    _seed(user_factory, model_factory)
    sign_in(page, live_url, "usage-admin")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(live_url + "/usage/")
        assert page.locator("#usage-totals [data-total=tokens]").text_content().replace("\u202f", "") == "7000"
        assert page.locator("#usage-chart svg rect").count() >= 2
        # the stacks are painted from the stylesheet (not the default black) in either theme
        fill = page.evaluate("getComputedStyle(document.querySelector('#usage-chart rect')).fill")
        assert fill not in ("", "rgb(0, 0, 0)", "none"), fill
        assert "Алиса" in page.locator("#usage-people").text_content()
        assert "Еженедельная сводка" in page.locator("#usage-agents").text_content()
        assert "gpt-large-model-name" in page.locator("#usage-models").text_content()
        page.set_viewport_size({"width": 375, "height": 812})
        page.reload()
        _no_horizontal_scroll(page)
    # drill down to the person: agents and conversations' totals
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(live_url + "/usage/")
    page.click("#usage-people a")
    page.wait_for_selector("#person-conversations")
    assert "2\u202f000" in page.locator("#person-conversations").text_content()
    assert "ответ" not in page.locator("#person").text_content()
    # the period picker: this month
    page.check("input[name=period][value=month]")
    page.click("form.picker button[type=submit]")
    page.wait_for_url(lambda url: "period=month" in url)
    assert page.locator("#usage-totals [data-total=tokens]").text_content().replace("\u202f", "") == "7000"


def test_my_spend_for_a_user_and_403_without_the_permission(live_url, page, user_factory, model_factory):
    _seed(user_factory, model_factory)
    sign_in(page, live_url, "usage-alice")
    page.set_viewport_size({"width": 375, "height": 812})
    page.goto(live_url + "/usage/me/")
    assert "Мои расходы" in page.locator("h1").text_content()
    assert page.locator("#me-1 [data-total=tokens]").text_content().replace("\u202f", "").startswith("7000")
    assert "Еженедельная сводка" in page.locator("#me-1").text_content()
    assert "осталось" in page.locator("#budget-left").text_content()
    _no_horizontal_scroll(page)
    assert page.locator("header nav a[href='/usage/']").count() == 0
    response = page.goto(live_url + "/usage/")
    assert response.status == 403
    api = page.request.get(live_url + "/api/usage?user=usage-admin")
    assert api.status == 403 and api.json()["code"] == "permission_denied"
