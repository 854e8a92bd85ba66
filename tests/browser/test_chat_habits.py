"""The chat habits people bring from Open WebUI and LibreChat (issue 26), in Chromium against
daphne: regenerate and edit replace the answer in place and keep the earlier versions to flip
between (‹ 2/3 ›), over the page's one socket; example questions on an empty chat; a thread shared
read-only with a colleague who lacks one of its cited sources; export as Markdown and PDF."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from conversations.models import Conversation, ConversationShare, Message
from knowledge.services import record_upsert
from tests.achilles.llm_stub_server import StubReply
from tests.browser import test_chat_page
from tests.browser.conftest import sign_in
from tests.browser.test_chat_page import SUPPORTED, ask, wait_socket_open

pytestmark = [pytest.mark.browser, pytest.mark.p1]

model = test_chat_page.model  # the stub model server, scripted by the test (a fixture)


def test_regenerate_and_edit_keep_versions_to_flip_between_over_one_socket(live_url, page, model, user_factory):
    user = user_factory(username="browser-versions")
    model.answers += [StubReply(text=SUPPORTED[0]), StubReply(text=SUPPORTED[1]), StubReply(text=SUPPORTED[2])]
    sign_in(page, live_url, user.username)
    page.goto("about:blank")  # the home page's own socket (its bell) is counted before this, not below
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(live_url + "/chat/")
    wait_socket_open(page)
    ask(page, "Сколько дней отпуска?")
    first = page.locator(".msg.assistant[data-id]")
    expect(first).to_contain_text("28 календарных дней", timeout=30_000)
    expect(page.locator("#stop")).to_be_hidden(timeout=30_000)

    # when: regenerate — the new answer takes the old one's place, the old one is version 1/2
    first.get_by_role("button", name="повторить ответ").click()
    count = page.locator(".msg.assistant .version-count")
    expect(count).to_have_text("2/2", timeout=30_000)
    expect(page.locator(".msg.assistant")).to_have_count(1)
    expect(page.locator(".msg.assistant .text")).to_contain_text("за две недели")
    expect(page.locator(".msg.user")).to_have_count(1)

    # flip back: ‹ shows the first answer, and it stays after a reload (stored in the thread)
    page.get_by_role("button", name="предыдущая версия").click()
    expect(count).to_have_text("1/2")
    expect(page.locator(".msg.assistant .text")).to_contain_text("28 календарных дней")
    page.reload()
    expect(page.locator(".msg.assistant .version-count")).to_have_text("1/2")
    expect(page.locator(".msg.assistant .text")).to_contain_text("28 календарных дней")

    # when: the question is edited — a new version of it beside the old, answered
    wait_socket_open(page)
    page.locator(".msg.user").get_by_role("button", name="изменить").click()
    page.fill("#q", "Можно ли разделить отпуск?")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.user .version-count")).to_have_text("2/2", timeout=30_000)
    expect(page.locator(".msg.user .text")).to_have_text("Можно ли разделить отпуск?")
    expect(page.locator(".msg.assistant .text")).to_contain_text("разделить на части", timeout=30_000)
    expect(page.locator(".msg")).to_have_count(2)

    thread = Conversation.objects.get(user=user)
    assert Message.objects.filter(conversation=thread, role="user").count() == 2
    assert Message.objects.filter(conversation=thread, role="assistant").count() == 3
    # the page's one socket carried every turn (one per load: the reload opened the second)
    assert len(sockets) == 2 and all(url.endswith("/ws/chat/") for url in sockets), sockets


def test_an_example_question_on_an_empty_chat_asks_it(live_url, page, model, user_factory):
    user = user_factory(username="browser-examples")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    examples = page.locator("#empty button.example")
    expect(examples).to_have_count(3)
    wait_socket_open(page)

    examples.first.click()

    expect(page.locator(".msg.user .text")).to_have_text("Сколько дней отпуска положено в год?")
    expect(page.locator(".msg.assistant[data-id]")).to_have_count(1, timeout=30_000)
    expect(page.locator("#empty")).to_be_hidden()


@pytest.fixture
def hr_thread(transactional_db, user_factory):
    """hr-lead's thread citing an open record [1] and an HR-only record [2]."""
    owner = user_factory(username="hr-lead", groups=["hr"])
    reader = user_factory(username="outsider", groups=["it"])
    ids = [
        record_upsert(
            source_system="files",
            external_id="pub/vacation.md",
            title="Политика отпусков",
            text="Отпуск — 28 календарных дней.",
            acl=["everyone"],
            url="https://wiki.example.com/vacation",
        ).record_id,
        record_upsert(
            source_system="hr",
            external_id="hr/salary.md",
            title="Оклады отдела",
            text="Оклад Иванова — 424242 рубля.",
            acl=["group:hr"],
            url="https://hr.example.com/salary",
        ).record_id,
    ]
    thread = Conversation.objects.create(user=owner, title="Отпуск и оклад")
    Message.objects.create(conversation=thread, role="user", content="Сколько отпуска и какой оклад?")
    answer = Message.objects.create(
        conversation=thread, role="assistant", content="Отпуск 28 дней [1]. Оклад известен [2]."
    )
    for rank, (record_id, title, url, text) in enumerate(
        zip(
            ids,
            ("Политика отпусков", "Оклады отдела"),
            ("https://wiki.example.com/vacation", "https://hr.example.com/salary"),
            ("Отпуск — 28 календарных дней.", "Оклад Иванова — 424242 рубля."),
            strict=True,
        ),
        start=1,
    ):
        answer.citations.create(
            record_id=record_id,
            title=title,
            url=url,
            source_system="files",
            chunk_text=text,
            rank=rank,
            markers=[rank],
        )
    return owner, reader, thread


def test_a_shared_thread_shows_a_source_the_reader_lacks_as_unavailable_and_revoke_ends_it(live_url, page, hr_thread):
    owner, reader, thread = hr_thread
    # given: the owner shares the thread from the chat page
    sign_in(page, live_url, owner.username)
    page.goto(live_url + f"/chat/?c={thread.pk}")
    page.get_by_role("button", name="Поделиться").click()
    page.fill("#share-username", "outsider")
    page.get_by_role("button", name="Открыть доступ").click()
    expect(page.locator("#share-readers")).to_contain_text("outsider")
    assert ConversationShare.objects.filter(conversation=thread, reader=reader).exists()
    page.fill("#share-username", "nobody-here")
    page.get_by_role("button", name="Открыть доступ").click()
    expect(page.locator("#share-error")).to_have_text("Нет активного сотрудника с таким логином.")

    # when: the reader finds it on their chat page and opens it
    other = page.context.browser.new_context(locale="ru-RU")
    try:
        reading = other.new_page()
        sign_in(reading, live_url, reader.username)
        reading.goto(live_url + "/chat/")
        reading.locator("#shared-threads a", has_text="Отпуск и оклад").click()
        reading.wait_for_url(f"**/chat/shared/{thread.pk}/")

        # then: the open source whole; the HR-only one «источник недоступен», nothing of it on the page
        cards = reading.locator(".source")
        expect(cards).to_have_count(2)
        expect(cards.nth(0)).to_contain_text("Политика отпусков")
        expect(cards.nth(0).locator(".system")).to_have_text("Файлы")  # the label, not «files»
        expect(cards.nth(1)).to_have_text("[2]источник недоступен")
        body = reading.content()
        assert "Оклады" not in body and "424242" not in body and "hr.example.com" not in body
        expect(reading.locator("#shared-by")).to_contain_text("hr-lead")
        expect(reading.locator("#q")).to_have_count(0)  # read-only: nothing to ask with

        # when: the owner revokes
        page.get_by_role("button", name="Отозвать доступ у outsider").click()
        expect(page.locator("#share-readers")).to_contain_text("Пока ни с кем не поделились.")

        # then: the reader's next look finds nothing
        reading.reload()
        expect(reading.locator("#log")).to_contain_text("Беседа недоступна")
    finally:
        other.close()


def test_the_readers_list_drawn_twice_at_once_names_each_reader_once(live_url, page, hr_thread):
    # The dialog draws its list when it opens and again after a share; on a slow network the first
    # answer can arrive after the second (held back here until the share is made).
    owner, _, thread = hr_thread
    held = []

    def hold_the_first_listing(route):
        if route.request.method == "GET" and not held:
            held.append(route)
        else:
            route.continue_()

    sign_in(page, live_url, owner.username)
    page.goto(live_url + f"/chat/?c={thread.pk}")
    listing = f"/api/conversations/{thread.pk}/shares"
    page.route(lambda url: url.split("?")[0].endswith(listing), hold_the_first_listing)
    page.get_by_role("button", name="Поделиться").click()
    page.fill("#share-username", "outsider")
    page.get_by_role("button", name="Открыть доступ").click()
    expect(page.locator("#share-readers")).to_contain_text("outsider")
    assert len(held) == 1
    held[0].continue_()  # the opening's listing arrives last
    page.wait_for_load_state("networkidle")
    expect(page.get_by_role("button", name="Отозвать доступ у outsider")).to_have_count(1)
    expect(page.locator("#share-readers li")).to_have_count(1)


def test_export_downloads_markdown_and_pdf_with_the_sources_as_footnotes(live_url, page, hr_thread):
    owner, _, thread = hr_thread
    sign_in(page, live_url, owner.username)
    page.goto(live_url + f"/chat/?c={thread.pk}")
    page.wait_for_selector(".msg.assistant[data-id]")

    with page.expect_download() as markdown:
        page.get_by_role("link", name="Скачать беседу в Markdown").click()
    with page.expect_download() as pdf:
        page.get_by_role("link", name="Скачать беседу в PDF").click()

    text = open(markdown.value.path(), encoding="utf-8").read()
    assert markdown.value.suggested_filename.endswith(".md")
    assert "Отпуск 28 дней[^1]. Оклад известен[^2]." in text
    assert "[^2]: Оклады отдела — <https://hr.example.com/salary>" in text
    assert pdf.value.suggested_filename.endswith(".pdf")
    assert open(pdf.value.path(), "rb").read(5) == b"%PDF-"
