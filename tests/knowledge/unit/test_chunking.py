"""Chunking along headings and paragraphs, bounded by the token estimate (KS-2)."""

import pytest

from achilles.llm.base import estimate_tokens
from knowledge.chunking import chunk_text


def test_empty_text_gives_no_chunks():
    assert chunk_text("   \n\n  ", title="T") == []


def test_heading_path_is_carried_by_each_chunk():
    text = (
        "# Отпуск\n\nВводный абзац.\n\n## Сколько дней\n\n28 дней.\n\n### Детали\n\nЕщё 3 дня.\n\n## Перенос\n\nМожно."
    )
    chunks = chunk_text(text, title="Отпуск")
    assert [c.heading for c in chunks] == [
        "Отпуск",
        "Отпуск › Сколько дней",
        "Отпуск › Сколько дней › Детали",
        "Отпуск › Перенос",
    ]
    assert [c.ordinal for c in chunks] == [0, 1, 2, 3]
    assert chunks[1].text == "28 дней."


def test_small_paragraphs_of_one_section_are_packed_together():
    chunks = chunk_text("Абзац один.\n\nАбзац два.\n\nАбзац три.", title="T", max_tokens=300)
    assert len(chunks) == 1
    assert chunks[0].text == "Абзац один.\n\nАбзац два.\n\nАбзац три."


@pytest.mark.parametrize("max_tokens", [16, 40, 120])
def test_every_chunk_respects_the_token_bound(max_tokens):
    sentence = "Сотрудникам положено двадцать восемь календарных дней отпуска. "
    text = "# Раздел\n\n" + sentence * 30 + "\n\n" + "слово" * 200 + "\n\nКороткий абзац."
    chunks = chunk_text(text, title="T", max_tokens=max_tokens)
    assert chunks
    assert all(estimate_tokens(c.text) <= max_tokens for c in chunks)


def test_long_paragraph_is_cut_at_sentence_ends():
    text = "Первое предложение довольно длинное. Второе предложение тоже длинное. Третье предложение."
    chunks = chunk_text(text, max_tokens=20)
    assert all(c.text.endswith(".") for c in chunks)
    assert " ".join(c.text for c in chunks) == text


def test_headings_inside_code_fences_are_text():
    text = "# Runbook\n\n```\n# not a heading\nrm -rf /tmp/x\n```\n\nПосле."
    chunks = chunk_text(text, title="Runbook")
    assert len(chunks) == 1 and "# not a heading" in chunks[0].text


def test_no_text_is_lost():
    text = "# A\n\nальфа бета\n\n## B\n\nгамма\n\nдельта"
    joined = " ".join(c.text for c in chunk_text(text, title="A", max_tokens=8))
    for word in ("альфа", "бета", "гамма", "дельта"):
        assert word in joined
