"""The web UI in a real browser: sign-in, API tokens, and a grounded chat turn over the websocket."""

import pytest
from django.db import connection
from playwright.sync_api import expect

from knowledge.services import record_upsert
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.p1]


def test_sign_in_and_create_an_api_token(live_url, page, user_factory):
    user_factory(username="browser-tokens")
    sign_in(page, live_url, "browser-tokens")
    page.goto(live_url + "/tokens/")
    page.fill("input[name=name]", "ноутбук")
    page.click("text=Создать")
    secret = page.text_content("#new-token")
    assert secret.startswith("ach_")
    assert "ноутбук" in page.text_content("table")
    # the secret is shown once
    page.goto(live_url + "/tokens/")
    assert page.locator("#new-token").count() == 0


def test_a_question_streams_a_grounded_answer_with_citations(live_url, page, user_factory, model_factory):
    # given the default builtin model and one document everyone may read
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-chat")
    record_upsert(
        source_system="files",
        external_id="vacation-policy",
        title="Политика отпусков",
        text="Ежегодный оплачиваемый отпуск сотрудника составляет 28 календарных дней. "
        "Заявление на отпуск подают за две недели.",
        acl=["everyone"],
        url="https://wiki.example.com/vacation",
    )
    sign_in(page, live_url, user.username)
    # when the user asks in the chat page
    page.goto(live_url + "/chat/")
    page.fill("#q", "Сколько дней длится ежегодный отпуск?")
    page.click("form#ask button")
    page.wait_for_selector(".msg.assistant .sources a")
    # then the answer quotes the document and cites it
    answer = page.locator(".msg.assistant .text").last.text_content()
    assert "28 календарных дней" in answer
    citation = page.locator(".msg.assistant .sources a").first
    assert "Политика отпусков" in citation.text_content()
    # and a click on the citation is recorded as an access signal
    with page.context.expect_page():
        citation.click()
    with connection.cursor() as cursor:
        for _ in range(50):
            cursor.execute("SELECT count(*) FROM knowledge_access_signals WHERE kind = 'click'")
            if cursor.fetchone()[0]:
                break
            page.wait_for_timeout(100)
        assert cursor.execute("SELECT count(*) FROM knowledge_access_signals WHERE kind = 'click'").fetchone()[0] == 1


def test_an_absent_fact_gets_ne_nashel(live_url, page, user_factory, model_factory):
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-absent")
    record_upsert(
        source_system="files",
        external_id="office",
        title="Офис",
        text="Офис компании находится на улице Лесной, дом 5.",
        acl=["everyone"],
    )
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    page.fill("#q", "Какой пароль от гостевого Wi-Fi в переговорной?")
    page.click("form#ask button")
    # (locator assertions, not wait_for_function: a string predicate is an eval, which the CSP refuses)
    expect(page.locator(".msg.assistant .meta").first).to_be_attached()
    expect(page.locator("#status")).to_have_text("")
    assert "не нашёл" in page.locator(".msg.assistant .text").last.text_content()


def test_an_ended_session_sends_the_chat_page_to_sign_in(live_url, page, user_factory, model_factory):
    # given a signed-in user on the chat page, its websocket open
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-signed-out")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    expect(page.locator("#status")).to_have_text("")
    # the socket's handshake reads the session too: deactivated before it is open, the page would
    # go to sign in on its own before the user asks (a race under load, not the case here)
    page.wait_for_selector("body[data-socket=open]", state="attached")
    # and the page's own calls done (the thread list, the bell's count): one still in flight when the
    # account is deactivated meets the 401 and takes the page to sign-in before the user asks
    page.wait_for_load_state("networkidle")
    # when the account is deactivated while the page is open, and the user asks
    with connection.cursor() as cursor:
        cursor.execute("UPDATE users SET is_active = false WHERE id = %s", [user.pk])
    page.fill("#q", "Сколько дней длится ежегодный отпуск?")
    page.click("form#ask button")
    # then the page goes to the sign-in form, back to the chat afterwards
    page.wait_for_url("**/accounts/login/?next=%2Fchat%2F*")
    assert page.locator("input[name=password]").count() == 1


def test_an_api_call_after_the_session_ended_goes_to_sign_in_and_back(live_url, page, user_factory, model_factory):
    from conversations.models import Conversation

    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-expired")
    Conversation.objects.create(user=user, title="Старая беседа")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    page.wait_for_selector("#threads a")
    # the page's own calls done (the thread list, the shared list, the models): a call still in flight
    # when the session ends would meet the 401 first and take the page to sign-in before the click
    page.wait_for_load_state("networkidle")
    # when the session ends on the server (signed out elsewhere) and the user opens a thread
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_session")
    page.click("#threads a")
    # then the page goes to the sign-in form, and signing in again brings the user back to the chat
    page.wait_for_url("**/accounts/login/?next=%2Fchat%2F*")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "pass-word-123")
    page.click("button[type=submit]")
    page.wait_for_url("**/chat/**")
    page.wait_for_selector("#threads a")
