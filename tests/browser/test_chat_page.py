"""The chat page in Chromium against daphne, the model an OpenAI-compatible stub server scripted by
the test (slow answers, hostile Markdown, outages): the connection, rendering and controls of issue 9.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from achilles.models import AllowedModel
from conversations.models import Conversation, Message
from knowledge.services import record_upsert
from tests.achilles.llm_stub_server import StubLLMServer, StubReply, StubToolCall
from tests.browser.conftest import (
    LAYER_HEALTH_CHECK_SECONDS,
    PING_INTERVAL_SECONDS,
    PING_TIMEOUT_SECONDS,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.p1]


# The one document of these tests. Grounded answers pass the support check (conversations.support)
# sentence by sentence, so every scripted grounded sentence below is carried by this text.
POLICY = (
    "Ежегодный оплачиваемый отпуск сотрудника составляет 28 календарных дней. Заявление на отпуск подают "
    "за две недели до его начала. Отпуск можно разделить на части. Перенос отпуска возможен по согласованию "
    "с руководителем. Команда для заявления в терминале:\n```\nhr vacation apply --days 28\n```"
)
SUPPORTED = [
    "Ежегодный оплачиваемый отпуск сотрудника составляет 28 календарных дней [1].",
    "Заявление на отпуск подают за две недели до его начала [1].",
    "Отпуск можно разделить на части [1].",
    "Перенос отпуска возможен по согласованию с руководителем [1].",
]


GROUNDED_MARKDOWN = (
    "Ежегодный оплачиваемый отпуск сотрудника [1]:\n- составляет 28 календарных дней;\n"
    "- можно разделить на части [1].\n\n| что | условие |\n|---|---|\n| заявление | за две недели до его начала [1] |"
    "\n\nКоманда для заявления [1]:\n```\nhr vacation apply --days 28\n```"
)


class ScriptedModel:
    """Round one (with tools) searches the knowledge base — or, with a reply in ``direct``, answers
    at once (a conversation turn: streamed, not sentence-checked); round two answers with
    the next text from ``answers`` (or the default), as a real model would stream it."""

    def __init__(self, stub: StubLLMServer):
        self.stub = stub
        self.answers: list[StubReply] = []
        self.direct: list[StubReply] = []
        stub.responder = self.reply

    def reply(self, body: dict) -> StubReply:
        if body.get("tools"):
            if self.direct:
                return self.direct.pop(0)
            return StubReply(tool_calls=[StubToolCall("search_knowledge", {"query": "отпуск"})])
        if self.answers:
            return self.answers.pop(0)
        return StubReply(text="Отпуск длится 28 календарных дней [1].")

    def model_names(self) -> list[str]:
        return [r.body.get("model") for r in self.stub.requests if not r.body.get("tools")]


def grounded(sentences: list[str]) -> str:
    return " ".join(sentences)


@pytest.fixture
def model(transactional_db):
    with StubLLMServer() as stub:
        AllowedModel.objects.create(
            name="stub-a",
            provider="openai",
            kind="chat",
            context_window=16000,
            is_default=True,
            options={"base_url": stub.base_url, "timeout": 90, "idle_timeout": 30},
        )
        record_upsert(
            source_system="files",
            external_id="vacation",
            title="Политика отпусков",
            text=POLICY,
            acl=["everyone"],
            url="https://wiki.example.com/vacation",
        )
        yield ScriptedModel(stub)


def ask(page, text: str) -> None:
    page.fill("#q", text)
    page.keyboard.press("Enter") if page.evaluate("document.activeElement.id") == "q" else page.click("#send")


# Waits are locator assertions, not wait_for_function: a string predicate is an eval, which the
# pages' Content-Security-Policy refuses.
def wait_answers(page, n: int, timeout: float = 30_000) -> None:
    """The n-th stored answer is on the page and no turn is running."""
    page.locator(".msg.assistant[data-id]").nth(n - 1).wait_for(state="attached", timeout=timeout)
    expect(page.locator("#stop")).to_be_hidden(timeout=timeout)


def wait_socket_open(page) -> None:
    page.wait_for_selector("body[data-socket=open]", state="attached")


# The idle tab's silence and the streamed answer's length: longer than every idle limit of the
# package's daphne (tests/browser/conftest.py), twice over — the layer's blocking pop (5 s), its
# health check and daphne's keepalive ping and pong — as the minute and the 20 s answer were for
# the production values (the chat-connection issue: the socket closed every ~5.5 s with 1011).
IDLE_SECONDS = 2 * max(5, LAYER_HEALTH_CHECK_SECONDS, PING_INTERVAL_SECONDS + PING_TIMEOUT_SECONDS) + 2
ANSWER_SECONDS = 2 * 5


def test_the_idle_limits_shortened_for_the_browser_tests_are_productions_defaults_elsewhere():
    """The idle-socket test runs against shortened limits; production's are the longer ones it
    stands for: daphne's keepalive defaults (make run, deploy/ pass none) and the layer's 30 s."""
    from channels_redis.core import RedisChannelLayer
    from daphne.cli import CommandLineInterface
    from django.conf import settings

    from achilles.settings import channel_layer_config

    daphne_defaults = CommandLineInterface().parser.parse_args(["achilles.asgi:application"])
    assert (daphne_defaults.ping_interval, daphne_defaults.ping_timeout) == (20, 30)
    root = Path(settings.BASE_DIR)
    for path in [root / "supervisord.conf", root / "Makefile", *(root / "deploy").rglob("*")]:
        if path.is_file() and "daphne" in (text := path.read_text(errors="replace")):
            assert "--ping-" not in text and "CHANNEL_LAYER_HEALTH_CHECK_SECONDS" not in text, path
    host = channel_layer_config(settings.REDIS_URL)["CONFIG"]["hosts"][0]
    assert host["health_check_interval"] == 30 == settings.CHANNEL_LAYER_HEALTH_CHECK_SECONDS
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout == 5


def test_an_idle_socket_outlasts_every_idle_limit_and_a_long_answer_arrives_whole(
    live_url, page, model, user_factory, daphne_log
):
    """Issue 9: the socket closed with 1011 every ~5.5 s and a long answer froze half-written (the
    channel-layer test in tests/achilles reproduced it). Two tabs at once, so the waits overlap:
    one stays idle past every idle limit of daphne and the channel layer (shortened for these
    tests: the test above ties them to production's), the other streams an answer twice as long as
    the blocking pop."""
    user = user_factory(username="browser-long")
    long_text = grounded(SUPPORTED * 3)  # twelve sentences, released one by one as they come
    model.answers.append(StubReply(text=long_text, chunk_chars=4, token_delay=ANSWER_SECONDS / (len(long_text) / 4)))
    sign_in(page, live_url, user.username)
    idle, streaming = page, page.context.new_page()
    sockets = {"idle": [], "streaming": []}
    idle.on("websocket", lambda ws: sockets["idle"].append(ws))
    streaming.on("websocket", lambda ws: sockets["streaming"].append(ws))
    started = time.monotonic()
    idle.goto(live_url + "/chat/")
    streaming.goto(live_url + "/chat/")
    wait_socket_open(streaming)
    # the long answer, streamed while the other tab sits idle
    ask(streaming, "Расскажи подробно про отпуск")
    t0 = time.monotonic()
    # it streams: the first sentence shows while the answer is still coming
    expect(streaming.locator(".msg.assistant .text.streaming")).to_contain_text("28 календарных дней", timeout=15_000)
    wait_answers(streaming, 1, timeout=60_000)
    took = time.monotonic() - t0
    assert took >= ANSWER_SECONDS * 0.75, took
    shown = streaming.locator(".msg.assistant .text").last.text_content()
    assert all(shown.count(sentence) == 3 for sentence in SUPPORTED), shown
    assert Message.objects.get(role="assistant").state == "complete"
    # the idle tab: no traffic past every idle limit, still the very first socket, and it still answers
    idle.wait_for_timeout(max(0, IDLE_SECONDS - (time.monotonic() - started)) * 1000)
    assert len(sockets["idle"]) == 1 and not sockets["idle"][0].is_closed()
    assert len(sockets["streaming"]) == 1 and not sockets["streaming"][0].is_closed()
    ask(idle, "Сколько дней отпуска?")
    wait_answers(idle, 1)
    assert "28 календарных дней" in idle.locator(".msg.assistant .text").last.text_content()
    assert len(sockets["idle"]) == 1
    assert "TimeoutError" not in daphne_log.read_text()


def test_markdown_renders_and_a_hostile_answer_is_inert(live_url, page, model, user_factory):
    user = user_factory(username="browser-md")
    # a conversation turn (no search) is not sentence-checked, so its Markdown is the model's own
    model.direct += [
        StubReply(
            text="## Отпуск\n\n| вид | дней |\n|---|---|\n| основной | 28 |\n\n```python\nprint('отпуск')\n```\n"
        ),
    ]
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    ask(page, "Сколько дней отпуска?")
    wait_answers(page, 1)
    answer = page.locator(".msg.assistant .text").last
    assert answer.locator("h2").text_content() == "Отпуск"
    assert answer.locator("table td").all_text_contents() == ["основной", "28"]
    assert answer.locator("pre code").text_content().strip() == "print('отпуск')"
    assert answer.locator("pre button.copy-code").count() == 1
    # a grounded answer with a list, a table and a code block arrives intact (issue 31); the [1]
    # marker links to its source card
    model.answers.append(StubReply(text=GROUNDED_MARKDOWN))
    ask(page, "Сколько дней длится отпуск?")
    wait_answers(page, 2)
    grounded_answer = page.locator(".msg.assistant .text").last
    assert grounded_answer.locator("li").all_text_contents() == [
        "составляет 28 календарных дней;",
        "можно разделить на части [1].",
    ]
    assert grounded_answer.locator("table th").all_text_contents() == ["что", "условие"]
    assert grounded_answer.locator("table td").all_text_contents() == ["заявление", "за две недели до его начала [1]"]
    assert grounded_answer.locator("pre code").text_content().strip() == "hr vacation apply --days 28"
    cite = grounded_answer.locator("a.cite").first
    assert cite.text_content() == "[1]"
    card = page.locator(cite.get_attribute("href"))
    assert "Политика отпусков" in card.text_content() and "28 календарных дней" in card.text_content()

    model.direct.append(
        StubReply(
            text='Ответ.\n\n<script>window.pwned = 1</script>\n\n<img src=x onerror="window.pwned = 2">\n\n'
            "[нажми](javascript:window.pwned=3)\n\n![логотип](https://evil.example/track.png)"
        )
    )
    ask(page, "А ещё?")
    wait_answers(page, 3)
    hostile = page.locator(".msg.assistant .text").last
    assert page.evaluate("window.pwned") is None
    assert hostile.locator("script, img, iframe, [onerror]").count() == 0
    assert page.locator(".msg a[href^='javascript:']").count() == 0
    assert "<script>" in hostile.text_content()  # shown as text
    assert hostile.locator("a[href='https://evil.example/track.png']").count() == 1  # a link, not loaded
    assert not [u for u in requests if "evil.example" in u]


def test_stop_and_regenerate(live_url, page, model, user_factory):
    user = user_factory(username="browser-stop")
    slow = grounded(SUPPORTED * 8)
    model.answers += [StubReply(text=slow, chunk_chars=6, token_delay=0.1), StubReply(text=SUPPORTED[3])]
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    ask(page, "Расскажи про отпуск")
    expect(page.locator(".msg.assistant .text").first).to_contain_text("две недели", timeout=15_000)
    page.keyboard.press("Escape")  # Esc stops, like the stop button
    page.wait_for_selector(".msg.assistant.interrupted[data-id]")
    assert "Ответ прерван" in page.locator(".msg.assistant").last.text_content()
    stored = Message.objects.get(role="assistant")
    assert stored.state == "interrupted" and 0 < len(stored.content) < len(slow)
    # regenerate: the same question answered again, in the old answer's place (kept as version 1/2)
    page.locator(".msg.assistant").last.get_by_role("button", name="повторить ответ").click()
    expect(page.locator(".msg.assistant .version-count")).to_have_text("2/2", timeout=30_000)
    expect(page.locator(".msg.assistant")).to_have_count(1)
    assert "Перенос отпуска возможен" in page.locator(".msg.assistant .text").last.text_content()
    questions = list(Message.objects.filter(role="user").values_list("content", flat=True))
    assert questions == ["Расскажи про отпуск"]
    assert Message.objects.filter(role="assistant").count() == 2


def test_rename_delete_and_search_conversations(live_url, page, user_factory):
    user = user_factory(username="browser-threads")
    for title in ["Отпуск летом", "Командировка в Казань", "Пароль от Wi-Fi"]:
        Conversation.objects.create(user=user, title=title)
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    page.wait_for_selector("#threads .thread")
    assert page.locator("#threads .thread").count() == 3
    assert page.locator("#threads .thread .date").first.text_content().strip() != ""
    # search
    page.fill("#thread-search", "командир")
    assert page.locator("#threads .thread .title").all_text_contents() == ["Командировка в Казань"]
    page.fill("#thread-search", "")
    # rename
    row = page.locator("#threads .thread", has_text="Отпуск летом")
    row.get_by_role("button", name="Переименовать беседу").click()
    page.locator("#threads .thread input").fill("Отпуск зимой")
    page.keyboard.press("Enter")
    page.wait_for_selector("#threads .thread:has-text('Отпуск зимой')")
    assert Conversation.objects.filter(user=user, title="Отпуск зимой").exists()
    # delete (after a confirmation)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#threads .thread", has_text="Пароль от Wi-Fi").get_by_role("button", name="Удалить беседу").click()
    expect(page.locator("#threads .thread")).to_have_count(2)
    assert not Conversation.objects.filter(user=user, title="Пароль от Wi-Fi").exists()


def test_the_model_picker_chooses_the_model_of_later_answers(live_url, page, model, user_factory):
    AllowedModel.objects.create(
        name="stub-b",
        provider="openai",
        kind="chat",
        context_window=16000,
        options={"base_url": model.stub.base_url, "timeout": 30},
    )
    user = user_factory(username="browser-models")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    expect(page.locator("#model option")).to_have_count(2)
    ask(page, "Сколько дней отпуска?")
    wait_answers(page, 1)
    page.select_option("#model", "stub-b")
    conversation = Conversation.objects.get(user=user)
    for _ in range(50):
        conversation.refresh_from_db()
        if conversation.selected_model_id:
            break
        time.sleep(0.1)
    assert conversation.selected_model.name == "stub-b"
    ask(page, "А сколько переносить можно?")
    wait_answers(page, 2)
    assert model.model_names() == ["stub-a", "stub-b"]
    assert "stub-b" in page.locator(".msg.assistant .meta").last.text_content()
    page.reload()
    expect(page.locator("#model")).to_have_value("stub-b")


def test_a_model_outage_shows_a_message_with_retry(live_url, page, model, user_factory):
    user = user_factory(username="browser-outage")
    model.stub.replies.append(StubReply(status=503, error_message="upstream down"))
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    ask(page, "Сколько дней отпуска?")
    page.wait_for_selector("#error:not([hidden])")
    assert "Модель сейчас недоступна" in page.text_content("#error-text")
    # the failed answer is marked failed in the thread: no thumbs, no token count
    page.wait_for_selector(".msg.assistant.failed")
    failed = page.locator(".msg.assistant.failed")
    assert failed.locator(".feedback").count() == 0 and "токен" not in failed.text_content()
    # the message stays (a reconnect banner or time does not replace it) until dismissed or retried
    page.wait_for_timeout(1500)
    assert page.is_visible("#error")
    page.click("#error-retry")
    wait_answers(page, 2)
    assert page.is_hidden("#error")
    assert "28 календарных дней" in page.locator(".msg.assistant .text").last.text_content()


def test_a_message_sent_while_the_socket_is_down_is_sent_when_it_is_back(live_url, page, model, user_factory):
    user = user_factory(username="browser-queue")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    wait_socket_open(page)
    # the connection drops, and the next attempt is a few seconds away (the back-off)
    page.evaluate("window.achillesChat.state.retries = 3; window.achillesChat.state.ws.close(4000)")
    page.wait_for_selector("#banner:not([hidden])")
    ask(page, "Сколько дней отпуска?")
    # the message waits, visibly, instead of being dropped
    page.wait_for_selector(".msg.user.queued")
    assert Message.objects.count() == 0
    wait_answers(page, 1)
    assert "28 календарных дней" in page.locator(".msg.assistant .text").last.text_content()
    assert page.is_hidden("#banner") and page.locator(".msg.user.queued").count() == 0
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == ["Сколько дней отпуска?"]


def test_without_a_websocket_the_page_falls_back_to_sse(live_url, page, model, user_factory):
    """A network that lets no websocket through (a proxy that drops the upgrade): the message waits
    a few seconds for the socket, then goes over SSE, and the answer arrives all the same."""
    user = user_factory(username="browser-sse")
    page.route_web_socket("**/ws/chat/", lambda ws: ws.close(code=1011))
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    page.wait_for_selector("#banner:not([hidden])")
    ask(page, "Сколько дней отпуска?")
    page.wait_for_selector(".msg.user.queued", state="attached")
    wait_answers(page, 1)
    assert "28 календарных дней" in page.locator(".msg.assistant .text").last.text_content()
    assert page.locator(".msg.assistant .sources .source").count() == 1
    # a follow-up in the same thread goes straight over SSE
    model.answers.append(StubReply(text=SUPPORTED[3]))
    ask(page, "А перенести можно?")
    wait_answers(page, 2)
    assert "Перенос отпуска возможен" in page.locator(".msg.assistant .text").last.text_content()
    assert Conversation.objects.get(user=user).messages.count() == 4


def test_each_marker_has_its_own_card_with_the_passage_it_points_to(live_url, page, model, user_factory):
    """Issue 31: two markers of one record that cite two of its chunks were one card showing the
    best chunk for both. The answer's markers read [1], [2] in order of use, and each card shows
    the passage of its own marker."""
    from achilles.llm.context import parse_context

    parking = "Во время отпуска машину можно оставить на парковке у офиса."
    badge = "На время отпуска пропуск сдают на ресепшн."
    record_upsert(
        source_system="files",
        external_id="leave-rules",
        title="Правила на время отпуска",
        text=f"## Парковка\n\n{parking}\n\n## Пропуск\n\n{badge}",
        acl=["everyone"],
    )

    def answer(body: dict) -> StubReply:
        # cite the chunks under the markers the packing gave them, the later marker first
        context = next(m["content"] for m in body["messages"] if m.get("role") == "tool")
        markers = {s.marker: s.text for s in parse_context(context)}
        of = {text: next(n for n, t in markers.items() if text in t) for text in (parking, badge)}
        first, second = sorted((parking, badge), key=lambda text: -of[text])
        return StubReply(text=f"{first[:-1]} [{of[first]}]. {second[:-1]} [{of[second]}].")

    original = model.stub.responder
    model.stub.responder = lambda body: original(body) if body.get("tools") else answer(body)
    user = user_factory(username="browser-cards")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/chat/")
    ask(page, "Что с парковкой и пропуском во время отпуска?")
    wait_answers(page, 1)

    text = page.locator(".msg.assistant .text").last.text_content()
    cards = page.locator(".msg.assistant .sources .source")
    assert text.index("[1]") < text.index("[2]")  # numbered in order of use
    assert cards.count() == 2
    first_sentence = text.split("[1]")[0].strip()
    assert cards.nth(0).locator(".num").text_content() == "[1]"
    assert first_sentence in cards.nth(0).locator(".passage").text_content()
    assert first_sentence not in cards.nth(1).locator(".passage").text_content()
    # the source by the label people know it by, not the store's key «files»
    expect(cards.nth(0).locator(".system")).to_have_text("Файлы")
