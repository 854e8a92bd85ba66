"""Coordination levels of the lexical query: all terms, all but one, …, any one."""

from knowledge.search.lexical import coordination_levels, tsquery_literal


def test_three_terms_give_and_pairs_or():
    assert coordination_levels(["a", "b", "c"]) == [
        "('a' & 'b' & 'c')",
        "('a' & 'b') | ('a' & 'c') | ('b' & 'c')",
        "'a' | 'b' | 'c'",
    ]


def test_one_term_is_one_level():
    # (search runs the all-terms level first and skips it here: a single term needs nothing more)
    assert coordination_levels(["отпуск"]) == ["'отпуск'"]


def test_levels_with_too_many_clauses_are_skipped():
    levels = coordination_levels([f"w{i}" for i in range(8)])
    # C(8,8)=1, C(8,7)=8 kept; C(8,6)=28 … C(8,2)=28 skipped; «any one» always kept
    assert len(levels) == 3
    assert levels[-1].count("|") == 7


def test_quotes_and_backslashes_are_escaped():
    assert tsquery_literal("it's") == "'it''s'"
    assert tsquery_literal("a\\b") == "'a\\\\b'"
