"""The pages as people meet them: one time zone on every page, readable buttons in dark mode, the
model picker always there, copy that says so and pastes clean text with footnotes."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from achilles.services import api_token_create
from conversations.models import Conversation, Message
from tests.browser.conftest import sign_in, wait_js

pytestmark = [pytest.mark.browser, pytest.mark.p1]

MOMENT = datetime(2026, 12, 4, 15, 1, tzinfo=UTC)  # 20:01 in Yekaterinburg, 10:01 in New York


def _thread(user) -> tuple[Conversation, Message]:
    conversation = Conversation.objects.create(user=user, title="Отпуск")
    Message.objects.create(conversation=conversation, role="user", content="Сколько дней отпуска?")
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        model="builtin-extractive",
        content="Отпуск — 28 календарных дней [1]. Заявление подают за две недели [2].",
    )
    for rank, title in ((1, "Политика отпусков"), (2, "Регламент заявлений")):
        answer.citations.create(
            record_id=None,
            chunk_id=None,
            title=title,
            url=f"https://kb.example/{rank}",
            source_system="uploads",
            chunk_text="…",
            rank=rank,
            markers=[rank],
        )
    Message.objects.filter(conversation=conversation).update(created_at=MOMENT)
    conversation.refresh_from_db()  # updated_at is the database's (a trigger keeps it)
    return conversation, answer


def _shown(moment: datetime, zone: str) -> str:
    return moment.astimezone(ZoneInfo(zone)).strftime("%d.%m.%Y %H:%M")


def test_every_page_shows_a_moment_in_the_users_time_zone_not_the_browsers(
    live_url, _browser, user_factory, model_factory
):
    # given: a reader in Yekaterinburg whose browser runs on New York time
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-tz", timezone="Asia/Yekaterinburg")
    conversation, _ = _thread(user)
    context = _browser.new_context(locale="ru-RU", timezone_id="America/New_York")
    page = context.new_page()
    try:
        sign_in(page, live_url, user.username)
        # when / then: home (rendered by the server) and the chat (by the script) agree
        updated = _shown(conversation.updated_at, "Asia/Yekaterinburg")
        assert updated != _shown(conversation.updated_at, "America/New_York")
        page.goto(live_url + "/")
        expect(page.locator("main")).to_contain_text(updated)
        page.goto(live_url + f"/chat/?c={conversation.pk}")
        expect(page.locator("#threads .date").first).to_have_text(updated)
        expect(page.locator(".msg.assistant .meta .info")).to_contain_text("04.12.2026 20:01")
    finally:
        context.close()


def _contrast(page, selector: str) -> float:
    return page.evaluate(
        """sel => {
          const lum = c => { const [r, g, b] = c.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number).map(v => {
              v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
            return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
          const style = getComputedStyle(document.querySelector(sel));
          const [a, b] = [lum(style.color), lum(style.backgroundColor)].sort((x, y) => y - x);
          return (a + 0.05) / (b + 0.05);
        }""",
        selector,
    )


def test_the_revoke_button_is_readable_in_both_themes(live_url, page, user_factory):
    user = user_factory(username="browser-revoke")
    api_token_create(user=user, name="ноутбук")
    sign_in(page, live_url, user.username)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(live_url + "/tokens/")
        assert _contrast(page, "form.revoke button.danger") >= 4.5, scheme


def test_one_model_picker_shown_disabled_and_copy_says_so_with_footnotes(live_url, page, user_factory, model_factory):
    # given: one chat model, an answer citing two sources
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-copy")
    conversation, _ = _thread(user)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_url)
    sign_in(page, live_url, user.username)
    page.goto(live_url + f"/chat/?c={conversation.pk}")
    page.wait_for_selector(".msg.assistant[data-id]")
    # then: the picker is there, with nothing to choose
    expect(page.locator("#model")).to_be_visible()
    expect(page.locator("#model")).to_be_disabled()
    # when: copy
    copy = page.locator(".msg.assistant .meta button[aria-label=копировать]")
    copy.click()
    # then: the button says so, and the text carries footnotes instead of raw markers
    expect(copy).to_contain_text("скопировано")
    wait_js(page, "navigator.clipboard.readText().then(t => t.length > 0)")
    text = page.evaluate("navigator.clipboard.readText()")
    assert "[1]" not in text and "[2]" not in text
    assert text == (
        "Отпуск — 28 календарных дней¹. Заявление подают за две недели².\n\n"
        "Источники:\n¹ Политика отпусков — https://kb.example/1\n² Регламент заявлений — https://kb.example/2"
    )


def test_thread_search_finds_a_thread_by_what_was_said_in_it(live_url, page, user_factory):
    user = user_factory(username="browser-search")
    _thread(user)  # titled «Отпуск»; its answer says «28 календарных дней»
    Conversation.objects.create(user=user, title="Командировка в Казань")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    expect(page.locator("#threads .thread")).to_have_count(2)
    page.fill("#thread-search", "28 календарных")
    expect(page.locator("#threads .thread .title")).to_have_text(["Отпуск"])
    page.fill("#thread-search", "такого нигде нет")
    expect(page.locator("#threads")).to_contain_text("Ничего не найдено.")
