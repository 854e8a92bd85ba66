"""A selective identity's visible lexical chain reads its lower levels in one pass, same results.

The lower coordination levels run as a chain (``lower_levels_statement``): one GIN scan per level
while the list is short. When few visible chunks hold a query word (``lexical_one_pass``: the
planner's visible chunks × the words' frequencies at most ``ONE_PASS_MAX_MATCHES``) the visible
chain's levels after its first branch are one branch instead: its visible rows matching «any word», each given the first level it matches and
that level's rank. The tests pin which statement is chosen, and that both give the same rows in
the same order — level by level, and whole searches against the pinned results.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge import facade
from knowledge.search import lexical
from knowledge.search.lexical import SideLists, apply_lower_levels, coordination_levels, lower_levels_statement
from tests.knowledge.conftest import identity_of
from tests.knowledge.integration.test_search_pinned import _observed, assert_pinned

pytestmark = pytest.mark.django_db

RARE = ["group:rare"]
ONE_PASS_MARK = "CASE x.level"  # the one-pass branch ranks each row by the level it matched first


@pytest.fixture(autouse=True)
def _fresh_verdicts():
    _fresh()
    yield
    _fresh()


@pytest.fixture
def corpus(make_record):
    """40 chunks everyone sees and 12 only ``group:rare`` sees, with four query words spread so a
    four-word query has matches at every coordination level (4, 3, 2 and 1 of its words)."""
    words = ["отпуск", "принтер", "бюджет", "сервер"]
    for i in range(40):
        make_record(f"open/{i}.md", f"Документ {i}: {words[i % 4]} и договор компании.")
    for i in range(12):
        shared = " ".join(words[j % 4] for j in range(i % 4, i % 4 + 1 + i % 4))  # 1…4 of the words
        filler = " ".join(["полка", "ящик", "стол"][: i % 3])  # lengths differ: so do the ranks
        make_record(f"rare/{i}.md", f"Закрытый документ {i}: {shared} {filler} склад.", acl=RARE)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_chunks")


def _lexemes(text: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT array(SELECT lexeme FROM unnest(to_tsvector('russian', %s)))", [text])
        return cursor.fetchone()[0]


def _fresh() -> None:
    lexical._visible_rows.clear()
    lexical._lexeme_frequencies.clear()


def test_the_verdict_follows_the_estimated_visible_chunks_holding_a_query_word(corpus, monkeypatch):
    """Visible chunks (the planner's estimate) × the words' frequencies (ANALYZE's): «документ» is
    in every chunk, «склад» only in the 12 rare ones."""
    monkeypatch.setattr(lexical, "ONE_PASS_MAX_MATCHES", 20)
    common, rare = _lexemes("документ"), _lexemes("склад")
    with connection.cursor() as cursor:
        assert lexical.lexical_one_pass(cursor, RARE, common)  # ≈ 12 visible × 1
        assert not lexical.lexical_one_pass(cursor, ["everyone"], common)  # ≈ 40 × 1
        assert lexical.lexical_one_pass(cursor, ["everyone"], rare)  # ≈ 40 × 12 / 52
        frequencies, _ = lexical._lexeme_frequencies.peek(())
        assert frequencies[common[0]] == pytest.approx(1.0) and frequencies[rare[0]] < 0.3
        # kept: a changed bound is seen at once, changed statistics only when the estimates expire
        monkeypatch.setattr(lexical, "ONE_PASS_MAX_MATCHES", 0)
        assert not lexical.lexical_one_pass(cursor, RARE, common)
        # no statistics: a word counts as in every chunk
        monkeypatch.setattr(lexical, "ONE_PASS_MAX_MATCHES", 20)
        _fresh()
        monkeypatch.setattr(lexical, "LEXEME_FREQUENCIES_SQL", "SELECT NULL::text[], NULL::real[] WHERE false")
        assert lexical.lexical_one_pass(cursor, RARE, rare)  # ≈ 12 × 1
        assert not lexical.lexical_one_pass(cursor, ["everyone"], rare)  # ≈ 40 × 1


def test_search_sends_the_one_pass_branch_for_the_selective_identity_only(corpus, monkeypatch):
    monkeypatch.setattr(lexical, "ONE_PASS_MAX_MATCHES", 20)
    with CaptureQueriesContext(connection) as rare:
        rare_result = facade.search("отпуск принтер бюджет сервер", identity_of(*RARE), k=8)
    with CaptureQueriesContext(connection) as broad:
        facade.search("отпуск принтер бюджет сервер", identity_of("everyone"), k=8)
    assert any(ONE_PASS_MARK in q["sql"] for q in rare.captured_queries)
    assert not any(ONE_PASS_MARK in q["sql"] for q in broad.captured_queries)
    assert {c.record_id for c in rare_result.candidates}  # it found the rare records


@pytest.mark.parametrize("seen_first", [False, True])
@pytest.mark.parametrize("depth", [30, 8, 10])
def test_one_pass_and_chain_give_the_same_rows_in_the_same_order(corpus, seen_first, depth):
    """Level by level: with a list deeper than the matches every visible rare chunk is reached, so
    the order across all levels is compared; with a shallow one, which rows the LIMIT keeps — and
    both with the first rows already seen."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_agg(lexeme ORDER BY lexeme) FROM unnest(to_tsvector('russian', "
            "'отпуск принтер бюджет сервер'))"
        )
        lexemes = cursor.fetchone()[0]
        assert len(coordination_levels(lexemes)) == 4
        seen: list[int] = []
        if seen_first:
            cursor.execute("SELECT min(id) FROM knowledge_chunks WHERE acl && %s::text[]", [RARE])
            seen = [cursor.fetchone()[0]]
        out, levels = {}, {}
        for one_pass in (False, True):
            for k in (0, 3):  # only the visible list short; both short (the shared first branch)
                side = SideLists(list(seen), [], set())
                statement = lower_levels_statement(
                    side, lexemes, RARE, depth, k, "c.id, c.acl && %(principals)s::text[]", "NULL", one_pass=one_pass
                )
                assert statement is not None
                assert (ONE_PASS_MARK in statement[0]) is one_pass
                cursor.execute(*statement)
                rows = cursor.fetchall()
                apply_lower_levels(side, rows, visible_at=5)
                out[one_pass, k] = (side.visible, side.unfiltered)
                levels[one_pass, k] = {row[1] for row in rows if row[0]}
    assert out[True, 0] == out[False, 0] and out[True, 3] == out[False, 3]
    if depth == 30:  # every rare chunk, from every lower level: «3 of 4», «2 of 4» and «any»
        assert len(out[True, 0][0]) == 12 and out[True, 0][0][: len(seen)] == seen
        assert levels[True, 0] == levels[True, 3] == {0, 1, 2}
    else:
        assert len(out[True, 0][0]) == depth


def test_the_chain_alone_returns_the_pinned_results(make_record, hash_embedder, settings, monkeypatch):
    """``test_search_pinned.py`` runs with the one pass for every identity (a small table); here
    with the chain for every identity: both paths hold the same pins."""
    settings.WITHHELD_HINTS_PER_HOUR = 10_000
    monkeypatch.setattr(lexical, "ONE_PASS_MAX_MATCHES", -1)
    calls = []
    monkeypatch.setattr(lexical, "_one_pass_branch", lambda *a: calls.append(a) or "")
    assert_pinned(_observed(make_record))
    assert not calls
