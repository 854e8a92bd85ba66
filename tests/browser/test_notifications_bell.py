"""The bell in the header: the unread count on load, a new notice counted live over the socket,
the list, and «Прочитать все»."""

import threading

import pytest
from django.db import connection
from playwright.sync_api import expect

from achilles.models import Notification
from achilles.notifications import notification_create
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.p1]


def _notify(user, title: str, kind: str = "agent_run") -> None:
    """As a worker writes a notice: from a thread without an event loop (Playwright's sync API keeps
    one running on the test's thread, where the channel layer's async_to_sync refuses to run)."""

    def write() -> None:
        try:
            notification_create(user_id=user.pk, kind=kind, title=title, link="/agents/")
        finally:
            connection.close()

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(30)


def test_the_bell_shows_the_count_live_and_reads_all(live_url, page, user_factory):
    # given a person with two unread notices (and someone else's)
    person = user_factory(username="browser-bell")
    other = user_factory(username="browser-bell-other")
    for title in ("Агент «Сводка» закончил работу", "Пакет #3 «Релиз» завершён"):
        _notify(person, title)
    _notify(other, "чужое", kind="hub_batch")
    # when they open a page
    sign_in(page, live_url, "browser-bell")
    page.goto(live_url + "/tokens/")
    # then the bell counts two
    expect(page.locator("#bell-count")).to_have_text("2")
    expect(page.locator("#bell-button")).to_have_attribute("aria-label", "Уведомления: непрочитанных 2")
    # and a notice written now is counted without a reload, once the socket is open
    page.wait_for_selector("#bell[data-live=true]", state="attached")
    _notify(person, "Агент «Ночной» закончил работу")
    expect(page.locator("#bell-count")).to_have_text("3")
    # the list shows the person's notices only, newest first
    page.click("#bell-button")
    titles = page.locator("#bell-list .bell-title")
    expect(titles).to_have_count(3)
    expect(titles.first).to_have_text("Агент «Ночной» закончил работу")
    expect(page.locator("#bell-list")).not_to_contain_text("чужое")
    # «Прочитать все» clears the count
    page.click("#bell-read-all")
    expect(page.locator("#bell-count")).to_be_hidden()
    assert not Notification.objects.filter(user=person, read_at__isnull=True).exists()


def test_on_the_chat_page_the_bell_counts_live(live_url, page, user_factory):
    # given a person on the chat page, which has a websocket of its own
    person = user_factory(username="browser-bell-chat")
    sign_in(page, live_url, "browser-bell-chat")
    page.goto(live_url + "/chat/")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    page.wait_for_selector("#bell[data-live=true]", state="attached")
    # when a notice is written
    _notify(person, "Агент «Чат» закончил работу")
    # then the bell counts it live (the chat's socket hands it the frame)
    expect(page.locator("#bell-count")).to_have_text("1")
