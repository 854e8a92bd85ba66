"""The lexical query text: only word runs reach to_tsquery (no operator injection)."""

from knowledge.selectors import tsquery_text


def test_words_are_quoted_and_or_ed():
    assert tsquery_text("Сколько дней отпуска?") == "'сколько' | 'дней' | 'отпуска'"


def test_tsquery_operators_and_quotes_are_stripped():
    assert tsquery_text("a & !b | c:* <-> 'd'") == "'a' | 'b' | 'c' | 'd'"


def test_duplicates_and_punctuation_only():
    assert tsquery_text("VPN vpn VPN") == "'vpn'"
    assert tsquery_text("?!.,") == ""
