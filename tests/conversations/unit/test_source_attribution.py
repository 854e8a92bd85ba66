"""Ссылки на источники уровня записи с лучшим чанком (seed: test_source_attribution.py)."""

import pytest

from conversations.citations import MarkerNumbers, build_citations
from conversations.packing import PackedSource
from tests.conversations.conftest import candidate, result, search_then

pytestmark = [pytest.mark.unit]


def packed(marker, record_id, rank, text="t", chunk_id=None):
    return PackedSource(
        marker=marker,
        record_id=record_id,
        chunk_id=chunk_id or record_id * 100 + marker,
        title=f"Запись {record_id}",
        url=f"https://kb/{record_id}",
        source_system="confluence",
        text=text,
        rank=rank,
    )


def test_record_level_citation(memory_engine, alice):
    """цитата уровня записи: ссылка на сущность-источник, лучший чанк остаётся при цитате."""
    memory_engine.ks.default = result(
        candidate(42, "Отпуск 28 дней.", title="Политика отпусков", url="https://wiki/vacation", chunk_id=4201)
    )
    memory_engine.script(*search_then("отпуск", "Отпуск 28 дней [1]."))

    [citation] = memory_engine.turn(alice, "Сколько отпуска?").done.citations

    assert citation["record_id"] == 42
    assert citation["title"] == "Политика отпусков" and citation["url"] == "https://wiki/vacation"
    assert citation["chunk_id"] == 4201 and citation["chunk_text"] == "Отпуск 28 дней."


def test_sources_deduplicated():
    """дедупликация: несколько чанков одной записи → одна цитата с лучшим фрагментом."""
    sources = [packed(1, 7, rank=3, text="хуже"), packed(2, 7, rank=1, text="лучший"), packed(3, 8, rank=2)]

    citations = build_citations(sources, "А [1]. Б [2]. В [3]. Снова А [1].")

    assert [c.record_id for c in citations] == [7, 8]
    assert citations[0].chunk_text == "лучший"
    assert citations[0].markers == (1, 2)


def test_cite_only_what_was_packed():
    """цитата только из переданного: маркер вне упаковки ничего не цитирует."""
    sources = [packed(1, 7, rank=1)]

    citations = build_citations(sources, "Правда [1]. Выдумка [2]. Ещё [99].")

    assert [c.record_id for c in citations] == [7]


def test_order_by_contribution():
    """порядок по вкладу: источники по релевантности упакованного чанка, ведущий — лучший."""
    sources = [packed(1, 10, rank=1), packed(2, 20, rank=2), packed(3, 30, rank=3)]

    citations = build_citations(sources, "Сначала третий [3], потом первый [1], потом второй [2].")

    assert [c.record_id for c in citations] == [10, 20, 30]
    assert [c.rank for c in citations] == [1, 2, 3]


def test_each_marker_keeps_the_passage_it_points_to():
    """Issue 31: markers [1] and [2] of one record folded into one card that showed chunk 40,
    while [2]'s sentence was in chunk 42: the citation keeps, per marker, its own chunk."""
    sources = [
        packed(1, 7, rank=1, text="Отпуск 28 дней.", chunk_id=40),
        packed(2, 7, rank=2, text="Перенос до 56 дней.", chunk_id=42),
    ]

    [citation] = build_citations(sources, "Отпуск 28 дней [1]. Перенос до 56 дней [2].")

    assert (citation.chunk_id, citation.chunk_text) == (40, "Отпуск 28 дней.")  # the best chunk, as before
    assert [(p.marker, p.chunk_id, p.text) for p in citation.passages] == [
        (1, 40, "Отпуск 28 дней."),
        (2, 42, "Перенос до 56 дней."),
    ]
    assert citation.as_dict()["passages"][1] == {"marker": 2, "chunk_id": 42, "text": "Перенос до 56 дней."}


def test_markers_are_numbered_in_order_of_first_use():
    """The model cites packed sources [3] and [7]; the reader sees [1] and [2], and the citations
    follow those numbers."""
    numbers = MarkerNumbers(frozenset({1, 3, 7}))
    sources = [packed(1, 10, rank=1), packed(3, 30, rank=3, chunk_id=33), packed(7, 70, rank=7)]

    shown = [
        numbers.renumber("Первое [3]. "),
        numbers.renumber("Второе [7], снова [3]. "),
        numbers.renumber("Ещё [7]."),
    ]
    citations = build_citations(numbers.sources(sources), "".join(shown))

    assert shown == ["Первое [1]. ", "Второе [2], снова [1]. ", "Ещё [2]."]
    assert [(c.record_id, c.markers) for c in citations] == [(30, (1,)), (70, (2,))]
    assert citations[0].passages[0].chunk_id == 33


def test_renumbering_leaves_code_and_unknown_markers_alone():
    numbers = MarkerNumbers(frozenset({4}))

    assert numbers.renumber("Массив `a[4]` и [9], источник [4].") == "Массив `a[4]` и [9], источник [1]."
    assert numbers.renumber("```\nx = a[4]\n```\n") == "```\nx = a[4]\n```\n"
