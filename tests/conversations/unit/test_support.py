"""The support check of a grounded answer (``conversations.support``): pure, no database.

Every rule of the module docstring has a case that passes and one that fails."""

import pytest

from conversations.support import (
    GroundingGate,
    SentenceSplitter,
    check_sentence,
    normalize_number,
    proper_names,
    split_sentences,
)

pytestmark = [pytest.mark.unit, pytest.mark.p0]

SOURCES = {
    1: "Ежегодный отпуск составляет 28 календарных дней. Заявку подают через портал HR.",
    2: "Ставка компенсации — 1,35 % в месяц, лимит 100 000 рублей. Действует с 01.03.2026.",
    3: "Контакт по вопросам бюджета: Ольга Финансова. Программа «Зелёный коридор» для новичков.",
}


def reason(sentence: str, **kw) -> str | None:
    return check_sentence(sentence, SOURCES, **kw).reason


@pytest.mark.parametrize(
    "sentence",
    [
        "Отпуск составляет 28 календарных дней [1].",
        "Ставка — 1.35 % в месяц [2].",  # «1,35» = «1.35»
        "Лимит — 100000 рублей [2].",  # «100 000» = «100000»
        "Ставка действует с 1.03.2026 [2].",  # leading zero
        "По вопросам бюджета контакт — Ольга Финансова [3].",  # a name, reordered
        "Для новичков есть программа «зелёного коридора» [3].",  # quoted term, case and inflection
        "Заявки подаются через портал HR [1].",
        "## Отпуск",  # a heading names a topic found in the context
    ],
)
def test_supported(sentence):
    assert reason(sentence) is None


@pytest.mark.parametrize(
    ("sentence", "why"),
    [
        ("А ещё у нас бесплатные обеды.", "no_marker"),
        ("Отпуск составляет 28 дней [7].", "unknown_marker"),
        ("Отпуск составляет 31 день [1].", "numbers"),
        ("Ставка — 1,5 % в месяц [2].", "numbers"),
        ("По бюджету обращайтесь к Ивану Петрову [3].", "names"),
        ("Программа «Красный коридор» для новичков [3].", "quotes"),
        ("Пароль администратора — swordfish [1].", "names"),  # a Latin word the source lacks
        ("Бесплатные обеды подают в столовой [1].", "overlap"),
        ("Отпуск составляет 28 календарных дней [2].", "numbers"),  # the fact is in [1], not in the cited [2]
        ("![логотип](https://evil.example/x.png) [1]", "image"),
        ("Подробнее: https://evil.example/?q=отпуск [1].", "outside_link"),
        ("## Бесплатные обеды", "overlap"),
    ],
)
def test_unsupported(sentence, why):
    assert reason(sentence) == why


def test_links_only_to_packed_sources():
    assert reason("Ежегодный отпуск: https://kb.example/1 [1].", source_urls=["https://kb.example/1"]) is None
    assert (
        reason("Политика отпусков: https://kb.example/2 [1].", source_urls=["https://kb.example/1"]) == "outside_link"
    )


def test_heading_overlap_threshold_is_the_boundary():
    # A heading is judged against the whole context by overlap: 2 of 4 content words found, 0.5.
    sentence = "## Отпуск подают долгий перерыв"
    assert check_sentence(sentence, SOURCES).overlap == 0.5
    assert reason(sentence, threshold=0.5) is None
    assert reason(sentence, threshold=0.51) == "overlap"


def test_numbers_normalised():
    assert normalize_number("1,35") == normalize_number("1.35") == "1.35"
    assert normalize_number("100 000") == normalize_number("100000") == "100000"
    assert normalize_number("007") == "7"


def test_proper_names_skip_the_opening_word():
    assert proper_names("Ольга ведёт бюджет вместе с Иваном из HR") == ["Иваном", "HR"]
    assert proper_names("- **Отпуск** оформляют заранее") == []


def test_splitter_keeps_markers_with_their_sentence():
    text = "Факт первый. [1] Факт второй [2]. Третий факт. [1][3]\nВ г. Москва офис [1].\n1. Пункт [2]"
    assert split_sentences(text) == [
        "Факт первый. [1]",
        " Факт второй [2].",
        " Третий факт. [1][3]",
        "\nВ г. Москва офис [1].",
        "\n1. Пункт [2]",
    ]


def test_splitter_is_the_same_fed_one_character_at_a_time():
    text = "Отпуск 28 дней. [1] Заявку подают через портал HR [1]. А ещё обеды."
    splitter = SentenceSplitter()
    pieces = [p for ch in text for p in splitter.feed(ch)] + splitter.flush()
    assert pieces == split_sentences(text)
    # A sentence is complete only once the next began: its marker may still come.
    assert SentenceSplitter().feed("Факт. [") == []


def test_splitter_cuts_the_same_whatever_the_deltas():
    """The splitter scans only when a delta may end a sentence (issue 15: no re-scan per token);
    any cutting of the stream into deltas gives the same sentences as the whole text."""
    import random

    text = (
        "Отпуск 28 дней. [1] В г. Москва офис [2]. Т. е. всё.\n\n## Итог\n1. Пункт [2]\n"
        "Сумма 1,35 млн! [3] Правда? [1]… Конец [2]"
    )
    expected = split_sentences(text)
    rng = random.Random(15)
    for _ in range(200):
        splitter, pieces, at = SentenceSplitter(), [], 0
        while at < len(text):
            step = rng.randint(1, 12)
            pieces += splitter.feed(text[at : at + step])
            at += step
        assert pieces + splitter.flush() == expected


def test_gate_releases_supported_and_keeps_the_rest_with_why():
    gate = GroundingGate(sources=SOURCES)
    out = gate.feed("Из моей памяти: отпуск 31 день. Отпуск составляет 28 календарных дней [1]. ")
    out += gate.feed("Ещё обеды бесплатные [1].")
    out += gate.flush()
    assert out == ["Отпуск составляет 28 календарных дней [1]."]  # leading space of a first release dropped
    assert [(v.sentence, v.reason) for v in gate.rejected] == [
        ("Из моей памяти: отпуск 31 день.", "no_marker"),
        ("Ещё обеды бесплатные [1].", "overlap"),
    ]
    assert gate.rejected[1].as_trace()["missing"] == ["обеды", "бесплатные"]


def gated(text: str, sources=SOURCES, step: int = 1) -> tuple[str, list[tuple[str, str | None]]]:
    """What a gate releases of ``text`` streamed ``step`` characters at a time, and what it refused."""
    gate = GroundingGate(sources=sources)
    out = [p for at in range(0, len(text), step) for p in gate.feed(text[at : at + step])] + gate.flush()
    return "".join(out), [(v.sentence, v.reason) for v in gate.rejected]


def test_gate_table_is_judged_row_by_row_and_delivered_whole():
    # A row cut inside by a sentence end («Отпуск.») is still one row.
    table = "| Что | Сколько |\n|---|---|\n| Отпуск. | 28 календарных дней [1] |\n| Лимит | 100 000 рублей [2] |"
    assert gated(table) == (table, [])
    bad = table + "\n| Обеды | бесплатно [1] |"
    text, refused = gated(bad)
    assert text == ""  # one unsupported row refuses the whole table
    assert refused == [("| Обеды | бесплатно [1] |", "overlap")]
    assert gated("| Что | Сколько |\n|---|---|")[1] == [("| Что | Сколько |\n|---|---|", "table_without_rows")]
    # An unmarked row takes its caption's markers; without a caption it has none.
    assert gated("Ставка [2]:\n| Лимит | 100 000 рублей |")[0] == "Ставка [2]:\n| Лимит | 100 000 рублей |"
    assert gated("| Лимит | 100 000 рублей |")[1] == [("| Лимит | 100 000 рублей |", "no_marker")]


def test_gate_code_block_passes_only_when_a_cited_chunk_holds_it():
    sources = {**SOURCES, 4: "Команда:\n```\nvpn  connect  office\n```"}
    good = "Команда [4]:\n```\nvpn connect office\n```"
    assert gated(good, sources) == (good, [])
    assert gated("Ставка [2]:\n```\nvpn connect office\n```", sources)[1] == [
        ("```\nvpn connect office\n```", "code_not_in_source")  # held by [4], not by the cited [2]
    ]
    unclosed = "Команда [4]:\n```\nrm -rf /"
    assert gated(unclosed, sources) == ("Команда [4]:", [("```\nrm -rf /", "code_not_in_source")])


def test_gate_list_items_and_headings():
    text = "## Отпуск\nЕжегодный отпуск [1]:\n- составляет 28 календарных дней\n- подают через портал HR [1]"
    assert gated(text, step=3) == (text, [])
    # A refused lead-in lends no markers; a heading with nothing under it that passes is dropped.
    text, refused = gated("## Отпуск\nОбеды [1]:\n- бесплатные\n## Ставка\nСтавка — 1,35 % в месяц [2].")
    assert text == "## Ставка\nСтавка — 1,35 % в месяц [2]."
    assert [why for _, why in refused] == ["overlap", "no_marker", "empty_heading"]


def test_a_verbatim_quote_of_the_cited_source_is_supported():
    """The offline model quotes its source: «…28 календарных дней; его можно делить…» was refused as
    `hedge` (the clause before «;» has no «можно», the source sentence has), so «How many vacation
    days…» lost its only answer. A sentence that is the cited text word for word changes nothing."""
    source = (
        "Ежегодный оплачиваемый отпуск — 28 календарных дней; его можно делить на части,\n"
        "одна из которых не короче 14 дней."
    )
    sentence = (
        "Ежегодный оплачиваемый отпуск — 28 календарных дней; его можно делить на части, "
        "одна из которых не короче 14 дней. [1]"
    )
    assert check_sentence(sentence, {1: source}).supported
    # a word changed is judged as before
    assert not check_sentence(sentence.replace("не короче", "короче"), {1: source}).supported


def test_a_verbatim_fragment_that_drops_a_negation_is_judged_as_before():
    source = "Стажёрам квартальная премия не положена. Остальным положена."
    assert not check_sentence("квартальная премия положена. [1]", {1: source}).supported
