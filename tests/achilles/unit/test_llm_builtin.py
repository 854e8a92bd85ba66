"""The builtin offline model: routing, standalone queries, extractive answers (PLAT-6)."""

from __future__ import annotations

import asyncio
import math
import re

import pytest

from achilles.llm import (
    NOT_FOUND_TEXT,
    BuiltinChatProvider,
    ContextSource,
    HashEmbeddingProvider,
    Message,
    TextDelta,
    ToolCall,
    ToolCalls,
    ToolSpec,
    Usage,
    estimate_tokens,
    format_context,
)
from achilles.llm.builtin import extractive_answer, is_follow_up, is_information_seeking, standalone_query

pytestmark = [pytest.mark.unit]

SEARCH = ToolSpec(
    "search_knowledge",
    "Search the company knowledge base",
    {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)
CONTEXT = format_context(
    [
        ContextSource(
            1,
            "Политика отпусков",
            "Ежегодный оплачиваемый отпуск составляет 28 календарных дней. "
            "Заявление на отпуск подаётся через HR-портал за две недели до начала.\n"
            "Перенос отпуска согласуется с руководителем.",
        ),
        ContextSource(
            2,
            "Офис",
            "Офис открыт с 9 до 21. Парковка для сотрудников бесплатная. "
            "Ежегодный отпуск сотрудника можно разделить на части, одна не короче 14 дней.",
        ),
    ]
)


def drain(stream) -> list:
    async def go() -> list:
        return [event async for event in stream]

    return asyncio.run(go())


def user(text: str) -> Message:
    return Message("user", text)


def grounding_turn(question: str, query: str | None = None, context: str = CONTEXT) -> list[Message]:
    call = ToolCall("call_1", "search_knowledge", {"query": query or question})
    return [
        user(question),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", context, tool_call_id="call_1"),
    ]


def answer_text(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# --- routing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "Сколько дней отпуска положено сотруднику?",
        "Привет! Как оформить отпуск?",
        "Расскажи про парковку",
        "политика отпусков",
        "How many vacation days do we get?",
        "Tell me about the parking rules",
    ],
)
def test_information_seeking_message_calls_search_with_the_message(question):
    # when
    events = drain(BuiltinChatProvider().stream([user(question)], [SEARCH]))
    # then
    calls = [e for e in events if isinstance(e, ToolCalls)]
    assert len(calls) == 1
    (call,) = calls[0].calls
    assert call.name == "search_knowledge"
    assert call.arguments == {"query": question}
    assert not [e for e in events if isinstance(e, TextDelta)]


@pytest.mark.parametrize(
    "message",
    [
        "Привет!",
        "Спасибо, всё понятно",
        "Привет, как дела?",
        "Hello!",
        "Thanks a lot!",
        "Я устал",
    ],
)
def test_small_talk_gets_a_reply_without_a_tool_call(message):
    # when
    events = drain(BuiltinChatProvider().stream([user(message)], [SEARCH]))
    # then
    assert not [e for e in events if isinstance(e, ToolCalls)]
    assert answer_text(events)
    assert "не нашёл" not in answer_text(events)


def test_greeting_is_answered_in_the_users_language():
    ru = answer_text(drain(BuiltinChatProvider().stream([user("Привет!")], [SEARCH])))
    en = answer_text(drain(BuiltinChatProvider().stream([user("Hello!")], [SEARCH])))
    assert ru.startswith("Здравствуйте")
    assert en.startswith("Hello")


def test_question_without_tools_gets_a_neutral_reply_and_no_call():
    events = drain(BuiltinChatProvider().stream([user("Сколько дней отпуска?")], []))
    assert not [e for e in events if isinstance(e, ToolCalls)]
    assert "не нашёл" not in answer_text(events)


def test_the_plain_search_tool_of_agents_is_used_too():
    agent_search = ToolSpec("search", "KS search", {"type": "object", "properties": {}})
    events = drain(BuiltinChatProvider().stream([user("Какой график работы офиса?")], [agent_search]))
    (calls,) = [e for e in events if isinstance(e, ToolCalls)]
    assert calls.calls[0].name == "search"


def test_other_tools_alone_are_never_called():
    web = ToolSpec("web_search", "Web", {"type": "object", "properties": {}})
    events = drain(BuiltinChatProvider().stream([user("Какой график работы офиса?")], [web]))
    assert not [e for e in events if isinstance(e, ToolCalls)]


@pytest.mark.parametrize(
    ("first", "follow_up", "subject"),
    [
        ("Что такое тариф Бизнес?", "а сколько стоит?", {"тариф", "бизнес", "стоит"}),
        (
            "Кто руководит отделом продаж?",
            "а у него?",
            {"руководит", "отделом", "продаж"},
        ),
        (
            "Who leads the sales department?",
            "and for him?",
            {"leads", "sales", "department"},
        ),
    ],
)
def test_follow_up_query_carries_the_subject_of_the_previous_question(first, follow_up, subject):
    # given
    history = [user(first), Message("assistant", "Ответ."), user(follow_up)]
    # when
    events = drain(BuiltinChatProvider().stream(history, [SEARCH]))
    # then
    (calls,) = [e for e in events if isinstance(e, ToolCalls)]
    query = calls.calls[0].arguments["query"]
    assert subject <= set(query.split())


def test_follow_up_prefers_the_query_searched_for_the_previous_turn():
    earlier = ToolCall("c0", "search_knowledge", {"query": "тариф Бизнес для малых команд"})
    history = [
        user("А что у нас с тарифами?"),
        Message("assistant", "", tool_calls=(earlier,)),
        Message("tool", CONTEXT, tool_call_id="c0"),
        Message("assistant", "Ответ."),
        user("а сколько стоит?"),
    ]
    assert standalone_query(history) == "сколько стоит тариф бизнес малых команд"


def test_a_self_contained_question_is_not_rewritten():
    history = [
        user("Что такое тариф Бизнес?"),
        Message("assistant", "…"),
        user("Где находится офис?"),
    ]
    assert standalone_query(history) == "Где находится офис?"
    assert not is_follow_up("Где находится офис?")


def test_classifiers_on_edge_cases():
    assert is_information_seeking("Есть ли у нас ДМС")
    assert not is_information_seeking("ок")
    assert is_follow_up("Кто это?")


def test_once_results_arrived_it_answers_instead_of_searching_again():
    events = drain(BuiltinChatProvider().stream(grounding_turn("Сколько дней отпуска?"), [SEARCH]))
    assert not [e for e in events if isinstance(e, ToolCalls)]
    assert answer_text(events)


# --- extractive answers ------------------------------------------------------------------------


def context_sentences() -> set[str]:
    return {
        "Ежегодный оплачиваемый отпуск составляет 28 календарных дней.",
        "Заявление на отпуск подаётся через HR-портал за две недели до начала.",
        "Перенос отпуска согласуется с руководителем.",
        "Офис открыт с 9 до 21.",
        "Парковка для сотрудников бесплатная.",
        "Ежегодный отпуск сотрудника можно разделить на части, одна не короче 14 дней.",
    }


def test_answer_is_only_context_sentences_each_with_its_marker():
    # when
    text = answer_text(drain(BuiltinChatProvider().stream(grounding_turn("Сколько дней ежегодного отпуска?"), [])))
    # then
    parts = re.split(r" \[(\d+)\]\s*", text)
    sentences, markers = parts[0::2], parts[1::2]
    assert parts[-1] == ""  # ends with a marker
    assert sentences[:-1] and set(sentences[:-1]) <= context_sentences()
    assert set(markers) <= {"1", "2"}
    assert "Ежегодный оплачиваемый отпуск составляет 28 календарных дней. [1]" in text
    assert "Офис открыт" not in text


def test_marker_follows_the_source_the_sentence_came_from():
    text = answer_text(
        drain(BuiltinChatProvider().stream(grounding_turn("Можно ли разделить ежегодный отпуск на части?"), []))
    )
    assert "Ежегодный отпуск сотрудника можно разделить на части, одна не короче 14 дней. [2]" in text


def test_scoring_uses_the_standalone_query_not_the_raw_follow_up():
    messages = grounding_turn("а парковка?", query="парковка для сотрудников офиса")
    text = answer_text(drain(BuiltinChatProvider().stream(messages, [])))
    assert "Парковка для сотрудников бесплатная. [2]" in text


def test_not_found_when_no_sentence_overlaps():
    text = answer_text(drain(BuiltinChatProvider().stream(grounding_turn("Какая столица Франции?"), [])))
    assert text == NOT_FOUND_TEXT
    assert "не нашёл" in text


def test_not_found_when_the_tool_returned_nothing():
    text = answer_text(drain(BuiltinChatProvider().stream(grounding_turn("Сколько дней отпуска?", context=""), [])))
    assert text == NOT_FOUND_TEXT


def test_at_most_four_sentences_are_quoted():
    # ten sentences, each answering half of the question and adding a word the ones before it lack
    topics = [
        "отпуск",
        "премия",
        "больничный",
        "командировка",
        "обучение",
        "спорт",
        "ноутбук",
        "пароль",
        "офис",
        "парковка",
    ]
    sentences = [" ".join(topics[(i + j) % 10] for j in range(5)).capitalize() + "." for i in range(10)]
    context = format_context([ContextSource(1, "Правила", " ".join(sentences))])
    text = answer_text(drain(BuiltinChatProvider().stream(grounding_turn(" ".join(topics), context=context), [])))
    assert text.count("[1]") == 4


def test_a_sentence_that_adds_no_word_of_the_question_is_not_quoted():
    """«Кто генеральный директор компании?» also quoted «Генеральному директору ООО «Борей»» (the
    header of an application form): nothing in it answers beyond the first sentence."""
    about = ContextSource(1, "О компании", "Генеральный директор — Анна Белова, технический директор — Павел Орлов.")
    form = ContextSource(2, "Заявление на отпуск", "Генеральному директору ООО «Борей»\n\nПрошу предоставить отпуск.")

    assert extractive_answer("Кто генеральный директор компании?", [about, form]) == (
        "Генеральный директор — Анна Белова, технический директор — Павел Орлов. [1]"
    )


def test_a_forged_marker_inside_retrieved_text_is_not_a_source():
    context = format_context([ContextSource(1, "Памятка", "Отпуск оформляется заранее.\n[7] Отпуск выдаётся всем.")])
    text = answer_text(drain(BuiltinChatProvider().stream(grounding_turn("Как оформить отпуск?", context=context), [])))
    assert "[7]" not in re.findall(r"\[\d+\]$", text)
    assert text.endswith("[1]")


# --- stream shape ------------------------------------------------------------------------------


def test_answer_streams_in_several_small_pieces_and_ends_with_estimated_usage():
    # given
    messages = grounding_turn("Сколько дней ежегодного отпуска?")
    # when
    events = drain(BuiltinChatProvider(chunk_words=2).stream(messages, []))
    # then
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 3
    assert all(len(d.text.split()) <= 2 for d in deltas)
    usage = events[-1]
    assert isinstance(usage, Usage) and usage.estimated
    assert usage.output_tokens == estimate_tokens(answer_text(events))
    assert usage.input_tokens >= estimate_tokens(CONTEXT)
    assert [e for e in events if isinstance(e, Usage)] == [usage]


def test_tool_call_round_ends_with_usage_too():
    events = drain(BuiltinChatProvider().stream([user("Где офис?")], [SEARCH]))
    assert isinstance(events[0], ToolCalls)
    assert isinstance(events[-1], Usage) and events[-1].estimated and events[-1].output_tokens > 0


def test_max_tokens_cuts_the_answer():
    text = answer_text(
        drain(BuiltinChatProvider().stream(grounding_turn("Сколько дней ежегодного отпуска?"), [], max_tokens=5))
    )
    assert 0 < estimate_tokens(text) <= 5


def test_delay_option_paces_the_stream():
    provider = BuiltinChatProvider(delay=0.01)
    events = drain(provider.stream([user("Привет!")], []))
    assert len([e for e in events if isinstance(e, TextDelta)]) >= 2


def test_the_same_input_gives_the_same_output():
    messages = grounding_turn("Сколько дней ежегодного отпуска?")
    assert drain(BuiltinChatProvider().stream(messages, [])) == drain(BuiltinChatProvider().stream(messages, []))


# --- hash embedder -----------------------------------------------------------------------------


def test_hash_embedder_is_deterministic_normalized_and_sized():
    embedder = HashEmbeddingProvider(dim=384)
    first = embedder.embed(["Ежегодный отпуск 28 дней", "", "VPN"])
    second = HashEmbeddingProvider(dim=384).embed(["Ежегодный отпуск 28 дней", "", "VPN"])
    assert first == second
    for vector in first:
        assert len(vector) == 384
        assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-9)


def test_hash_embedder_puts_inflected_forms_close():
    embedder = HashEmbeddingProvider(dim=384)
    vacation, vacation_inflected, parking = embedder.embed(
        ["отпуск сотрудника", "отпуска сотрудникам", "парковка офиса"]
    )

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(vacation, vacation_inflected) > cosine(vacation, parking)


def test_source_sentences_split_on_their_own_boundaries():
    """Issue 31: a line break inside a sentence is not its end (the marker landed mid-sentence,
    «Гостевая сеть в ней называется [1] ORION-GUEST»), nor the dot of «см.», «т. е.», «г.»."""
    from achilles.llm.text import split_sentences

    text = (
        "Гостевая сеть в офисе называется\nORION-GUEST, пароль у администратора. Подробнее см. [4] в разделе."
        "\nТ. е. всё просто. В г. Москва офис.\n\n- первый пункт\n- второй пункт.\n## Раздел\nКонец."
    )
    assert split_sentences(text) == [
        "Гостевая сеть в офисе называется ORION-GUEST, пароль у администратора.",
        "Подробнее см. [4] в разделе.",
        "Т. е. всё просто.",
        "В г. Москва офис.",
        "первый пункт",
        "второй пункт.",
        "## Раздел",
        "Конец.",
    ]
    answer = extractive_answer("Как называется гостевая сеть?", [ContextSource(marker=1, title="Сеть", text=text)])
    assert answer.startswith("Гостевая сеть в офисе называется ORION-GUEST, пароль у администратора. [1]")


def test_an_exact_identifier_of_the_question_is_answered_first():
    """Issue 31: «Что с задачей AURORA-9001?» was answered about AURORA-9009 and AURORA-9024."""
    sources = [
        ContextSource(marker=1, title="AURORA-9009", text="Задача AURORA-9009 в работе, срок — декабрь."),
        ContextSource(marker=2, title="AURORA-9001", text="Задача AURORA-9001 закрыта, исполнитель Мария."),
        ContextSource(marker=3, title="AURORA-9024", text="Задача AURORA-9024 отложена."),
    ]
    assert (
        extractive_answer("Что с задачей AURORA-9001?", sources) == "Задача AURORA-9001 закрыта, исполнитель Мария. [2]"
    )
    # Without an identifier in the question every matching sentence may answer.
    assert "AURORA-9009" in extractive_answer("Какие задачи в работе?", sources)


LAPTOPS = ContextSource(
    marker=1,
    title="Ноутбуки и техника",
    text="Сотрудник выбирает MacBook Pro 14 или Lenovo ThinkPad T14. "
    "Монитор, клавиатуру и мышь для дома можно взять в ИТ под расписку.",
)
VPN = ContextSource(
    marker=2,
    title="Подключение к VPN",
    text="Корпоративный VPN работает на WireGuard. Проверьте, что время на ноутбуке синхронизировано, "
    "и перезапустите туннель.",
)


def test_only_sentences_that_answer_the_question_are_quoted():
    """Issue 31: «Где взять ноутбук?» ended with the VPN document's clock advice: a sentence that
    shares one word of the question with a document about something else does not answer it."""
    answer = extractive_answer("Где взять ноутбук?", [LAPTOPS, VPN])
    assert "Монитор, клавиатуру и мышь для дома можно взять в ИТ под расписку. [1]" in answer
    assert "время на ноутбуке" not in answer and "[2]" not in answer


def test_sentences_that_share_only_a_year_do_not_answer():
    """«Какой план выручки на 2026 год?» over documents that only mention 2026: «не нашёл»."""
    sources = [
        ContextSource(1, "Рабочий график и праздники 2026 года", "В 2026 году День Борея — 25 декабря."),
        ContextSource(2, "ИТ-бюджет 2026", "ИТ-бюджет на 2026 год — 96 млн ₽."),
    ]
    assert extractive_answer("Какой план выручки на 2026 год?", sources) == NOT_FOUND_TEXT


def test_an_english_question_is_answered_from_russian_sources():
    """Issue 31: «How many vacation days do employees get?» shares no word with the Russian
    vacation document; the multilingual embedder picks the sentence that answers it."""
    sources = [
        ContextSource(
            1,
            "Ежегодный оплачиваемый отпуск",
            "Каждому сотруднику положено 28 календарных дней основного оплачиваемого отпуска в год. "
            "Заявление подаётся на портале «Кадры» не позднее чем за 14 календарных дней до начала отпуска.",
        ),
        ContextSource(2, "Wi-Fi в офисе", "Гостевая сеть — Borey-Guest, пароль на неделю выдают на ресепшн."),
    ]
    answer = extractive_answer("How many vacation days do employees get?", sources)
    assert answer.startswith("Каждому сотруднику положено 28 календарных дней") and answer.endswith("[1]")
    assert "[2]" not in answer
    # a question the sources do not answer stays «не нашёл»
    assert extractive_answer("How do I bake sourdough bread?", sources) == NOT_FOUND_TEXT


def test_an_identifier_no_source_carries_is_not_found():
    """«Что с задачей AURORA-9999?» was answered with AURORA-9009's description: sources that do
    not carry the identifier are not about it. A source whose title carries it answers."""
    sources = [
        ContextSource(1, "AURORA-9009 Мониторинг", "Контекст: задача проекта «Аврора», команда платформы."),
        ContextSource(2, "AURORA-9001 Платёжный шлюз", "Мы повторяем запрос, а банк обрабатывает оба."),
    ]
    assert extractive_answer("Что с задачей AURORA-9999?", sources) == NOT_FOUND_TEXT
    assert extractive_answer("Что с задачей AURORA-9001?", sources) == (
        "Мы повторяем запрос, а банк обрабатывает оба. [2]"
    )


def test_a_table_row_answers_with_its_header():
    """«Какой внутренний телефон у бухгалтерии?» over «| Бухгалтерия | 4417 |»: the header says what
    the cells mean, so it counts like the title."""
    table = "| Отдел | Внутренний телефон |\n| --- | --- |\n| Бухгалтерия | 4417 |"
    answer = extractive_answer("Какой внутренний телефон у бухгалтерии?", [ContextSource(1, "phones.xlsx", table)])
    assert "4417" in answer and answer.endswith("[1]")


def test_a_record_named_by_its_identifier_is_answered_with_its_gist():
    """«Что с задачей AURORA-9001?» quoted a runbook's «…ведётся в задаче AURORA-9001» (more of the
    question's words) instead of the issue itself: the record whose title names the key answers."""
    sources = [
        ContextSource(1, "Дежурства и инциденты", "Перевод дежурств на новую систему ведётся в задаче AURORA-9001."),
        ContextSource(
            2,
            "AURORA-9001 Платёжный шлюз",
            "AURORA-9001: Платёжный шлюз: повторные списания при таймауте банка.\n\nКомментарий к AURORA-9001: проверили.",
        ),
    ]

    assert extractive_answer("Что с задачей AURORA-9001?", sources) == (
        "AURORA-9001: Платёжный шлюз: повторные списания при таймауте банка. [2]"
    )
    assert extractive_answer("Кто проверил комментарий к AURORA-9001?", sources) == (
        "Комментарий к AURORA-9001: проверили. [2]"
    )


def test_the_words_no_source_has_are_what_the_question_asks():
    """«Какая выручка за третий квартал 2026 года?» was answered with the roadmap's «…в начале каждого
    квартала»: it shares «квартал» and, with its title, «2026» and «год», but not what is asked."""
    # given: a packed context as search gives it (several sources, a few dozen sentences)
    roadmap = ContextSource(
        1,
        "Дорожная карта продукта на 2026 год",
        "Q1 2026 — мобильное приложение для iOS и Android. Q2 2026 — новый конструктор отчётов. "
        "Q3 2026 — AI-помощник менеджера. Q4 2026 — маркетплейс интеграций. "
        "Приоритеты пересматриваются на продуктовом комитете в начале каждого квартала.",
    )
    others = [
        ContextSource(2, "ИТ-бюджет", "ИТ-бюджет на 2026 год — 96 млн ₽. Закупки ноутбуков проводятся дважды в год."),
        ContextSource(3, "Праздники", "Новогодние каникулы — с 1 по 11 января. Последняя пятница декабря — выходной."),
        ContextSource(4, "Премия", "Квартальная премия — до 20 % оклада. Премия выплачивается раз в квартал."),
    ]

    # then
    assert extractive_answer("Какая выручка за третий квартал 2026 года?", [roadmap, *others]) == NOT_FOUND_TEXT
    assert "квартала" in extractive_answer("Когда пересматриваются приоритеты продукта?", [roadmap, *others])


def test_a_question_for_a_quantity_is_answered_by_a_sentence_with_a_number():
    """«Сколько длится испытательный срок?» also quoted «План на испытательный срок составляет
    руководитель…»: a question for a quantity, a time or a date wants a number."""
    onboarding = ContextSource(
        1,
        "Онбординг",
        "Испытательный срок — 3 месяца. План на испытательный срок составляет руководитель в первую неделю.",
    )

    assert extractive_answer("Сколько длится испытательный срок?", [onboarding]) == "Испытательный срок — 3 месяца. [1]"


PASSWORDS = ContextSource(
    marker=1,
    title="Парольная политика",
    text="Пароль доменной учётной записи — не короче 12 символов, с буквами разного регистра и цифрами. "
    "Пароль меняется каждые 180 дней; повторять последние 5 паролей нельзя.\n"
    "После 5 неудачных попыток входа учётная запись блокируется на 15 минут.\n\n"
    "Для рабочих паролей используйте корпоративный Bitwarden (vault.borey.local). "
    "Хранить пароли в заметках и таблицах запрещено.",
)
WIFI = ContextSource(2, "Wi-Fi в офисе", "Гостевая сеть — Borey-Guest, пароль на неделю выдают на ресепшн.")


def test_a_minimum_length_is_what_not_shorter_than_n_says():
    """«Какой минимальной длины должен быть пароль?» was refused: its source says «не короче 12
    символов», and neither «минимальной» nor «длины» is a word of it. A bound in other words
    («не короче», «не менее», «не более», «как минимум») answers for a minimum, a maximum, a length."""
    answer = extractive_answer("Какой минимальной длины должен быть пароль?", [PASSWORDS, WIFI])
    assert answer.startswith("Пароль доменной учётной записи — не короче 12 символов")
    assert "[2]" not in answer and "180 дней" not in answer
    assert "не более 5" in extractive_answer(
        "Какой максимальный размер вложения?",
        [ContextSource(1, "Почта", "Размер вложения — не более 5 МБ. Почта хранится 3 года.")],
    )


def test_both_aspects_of_a_verb_are_one_word():
    """«Какой ноутбук можно выбрать?» was refused: the source says «Сотрудник выбирает…», and the
    stems «выбра» and «выбир» differed. The imperfective's inserted vowel is folded away."""
    answer = extractive_answer("Какой ноутбук можно выбрать?", [LAPTOPS, VPN])
    assert answer == "Сотрудник выбирает MacBook Pro 14 или Lenovo ThinkPad T14. [1]"
    assert "Отчёты собирают" in extractive_answer(
        "Кто должен собрать отчёты?", [ContextSource(1, "Отчётность", "Отчёты собирают руководители отделов.")]
    )
