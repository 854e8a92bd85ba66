"""Which words of a question are identifiers, matched exactly and first by search."""

import pytest

from knowledge.search.identifiers import like_pattern, query_identifiers


@pytest.mark.parametrize(
    ("question", "identifiers"),
    [
        ("Что с задачей AURORA-9001?", ["AURORA-9001"]),
        ("Что значат ERR-502 и E1234?", ["ERR-502", "E1234"]),
        ("Когда вышел релиз 4.2?", ["4.2"]),
        ("Что нового в v2.10.1.", ["v2.10.1"]),
        ("Напиши на ivan.petrov@borey.ru", ["ivan.petrov@borey.ru"]),
        ("Где лежит report_2026.xlsx?", ["report_2026.xlsx"]),
        ("Простой при миграции pg-prod-01", ["pg-prod-01"]),
        ("AURORA-9001 и aurora-9001", ["AURORA-9001"]),
    ],
)
def test_identifiers_of_a_question(question, identifiers):
    assert query_identifiers(question) == identifiers


@pytest.mark.parametrize(
    "question",
    [
        "Сколько дней отпуска в 2026 году?",
        "Офис открыт с 9:00 до 18:00, 3-х дней, 99,95 %",
        "Срок 2026-11-20, iOS 16 и Wi-Fi",
        "Какой пароль?",
    ],
)
def test_numbers_dates_and_words_are_not_identifiers(question):
    assert query_identifiers(question) == []


def test_like_pattern_escapes_wildcards():
    assert like_pattern("report_2026%.xlsx") == "%report\\_2026\\%.xlsx%"
