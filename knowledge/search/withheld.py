"""Which hidden chunks are relevant to a question: decided from its topic, never from one rare token.

Issue 10: «PLUTONIUM» → hint, «URANIUM» → none, and a sweep of numbers lit up a colleague's salary.
Each query word is reduced to its lexemes; a lexeme is topical when it holds no digit and at least
WITHHELD_MIN_RECORDS curated records contain it (under any ACL: the count reveals only that a word
is common). Curated: not ``user_writable`` — records people can write (Jira issues, uploads, open
wiki spaces) never count, so no one can make a word common by planting it (security round two). Withheld is computed from the topical lexemes (and the topical words, for the semantic
side) alone, so replacing a number or a word found in fewer records by any other number or rare
word cannot change the answer. The record count stops after TOPIC_SCAN_CHUNKS matching chunks (a
word in that many chunks of fewer records counts as rare: the safe side).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from django.db.backends.utils import CursorWrapper

from knowledge.models import TEXT_SEARCH_CONFIG
from knowledge.search.lexical import MAX_QUERY_TERMS

TOPIC_SCAN_CHUNKS = 200
MAX_TOPIC_WORDS = 64
_WORD = re.compile(r"\w+", re.UNICODE)

# Each word's lexemes, those of them whose record count decides (no digit, no quote or backslash),
# and the version of the content generation row the counts are cached under: its number and the
# transaction that wrote it (a rolled-back change can leave its number to be reused, never the
# pair). It rides in the message of the first lexical level.
WORDS_SQL = f"""
SELECT t.ord, w.lexemes,
       ARRAY(SELECT y FROM unnest(w.lexemes) AS y
             WHERE y !~ '[[:digit:]]' AND strpos(y, chr(39)) = 0 AND strpos(y, chr(92)) = 0),
       (SELECT n::text || ':' || xmin::text FROM knowledge_generation WHERE id = 1)
FROM unnest(%(words)s::text[]) WITH ORDINALITY AS t(word, ord),
     LATERAL (SELECT ARRAY(SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', t.word))) AS lexemes) w
ORDER BY t.ord
"""


class WordRow:
    """Columns of a row of WORDS_SQL."""

    ORD: Final = 0
    LEXEMES: Final = 1
    COUNTABLE: Final = 2  # the lexemes whose record count decides
    GENERATION: Final = 3  # the same in every row


def words_generation(word_rows: Sequence[Sequence[Any]]) -> str:
    """The content generation WORDS_SQL's rows were read at ("" without rows, or without one)."""
    first = next(iter(word_rows), None)
    return str(first[WordRow.GENERATION] or "") if first is not None else ""


# How many curated records contain each lexeme, counting the first TOPIC_SCAN_CHUNKS matching
# chunks of them. A record people can write (``user_writable``: a Jira issue, an upload) never
# counts, under any ACL: otherwise anyone could plant records repeating guessed words and watch which
# of them lift a hidden record's words over the threshold (security round two, finding 1). The
# chunks' copy of the flag has a partial text index of its own (knowledge_chunk_cur_tsv_gin).
# A lexeme counts with its word family (``lexeme_family``): its root as a prefix, when it has one.
LEXEME_RECORDS_SQL = """
SELECT x.lexeme,
       (SELECT count(DISTINCT s.record_id) FROM (
            SELECT c.record_id FROM knowledge_chunks c
            WHERE c.tsv @@ (chr(39) || x.family || chr(39) || CASE WHEN x.family <> x.lexeme THEN ':*' ELSE '' END)::tsquery
              AND NOT c.user_writable
            LIMIT %(scan)s) s)
FROM unnest(%(lexemes)s::text[], %(families)s::text[]) AS x(lexeme, family)
"""
# A Russian relational adjective is its noun plus a suffix the stemmer leaves on: «зарплатная» →
# «зарплатн» beside «зарплата» → «зарплат», «налоговый» → «налогов», «отпускной» → «отпускн». Such an
# adjective is as common as its noun: its record count is its family's (the root as a prefix), so a
# question worded with the adjective («зарплатная вилка») has the topic the noun has. A rare root
# stays rare («плутониевый»), and the family decides only whether the word is common: the hidden
# chunks are still matched by the word's own lexeme.
_FAMILY_SUFFIX = re.compile(r"^([а-яё]{5,}?)(?:н|ов|ев|ск)$")


def lexeme_family(lexeme: str) -> str:
    """The root whose records a lexeme counts with (itself when it has no relational suffix)."""
    match = _FAMILY_SUFFIX.match(lexeme)
    return match.group(1) if match else lexeme


def _count_params(lexemes: Sequence[str]) -> dict[str, Any]:
    return {"lexemes": list(lexemes), "families": [lexeme_family(x) for x in lexemes], "scan": TOPIC_SCAN_CHUNKS}


# Those counts change only with the content, and the content generation moves (by trigger) on
# every change of chunks: so they are kept per generation, and a word is counted in the index once
# per generation per process instead of on every search. Bounded; a new generation starts afresh.
LEXEME_RECORDS_CACHE_SIZE = 50_000
_lexeme_records: dict[tuple[str, str], int] = {}
_lexeme_records_generation = ""


def lexeme_records(cursor: CursorWrapper, lexemes: Sequence[str], generation: str) -> dict[str, int]:
    """Record counts (see LEXEME_RECORDS_SQL) of ``lexemes`` at content ``generation``, cached."""
    global _lexeme_records_generation
    if not generation:  # no generation row: nothing to key a cache on
        cursor.execute(LEXEME_RECORDS_SQL, _count_params(list(dict.fromkeys(lexemes))))
        return {lexeme: int(records) for lexeme, records in cursor.fetchall()}
    cache = _lexeme_records
    if generation != _lexeme_records_generation or len(cache) > LEXEME_RECORDS_CACHE_SIZE:
        cache.clear()
        _lexeme_records_generation = generation
    found = {lexeme: cache[(generation, lexeme)] for lexeme in lexemes if (generation, lexeme) in cache}
    missing = [lexeme for lexeme in dict.fromkeys(lexemes) if lexeme not in found]
    if missing:
        cursor.execute(LEXEME_RECORDS_SQL, _count_params(missing))
        for lexeme, records in cursor.fetchall():
            found[lexeme] = cache[(generation, lexeme)] = int(records)
    return found


def lexeme_records_missing(word_rows: Sequence[tuple[Any, ...]]) -> tuple[str, list[str]]:
    """The content generation of WORDS_SQL's rows and the countable lexemes whose record counts are
    not cached for it (``lexeme_records_statement`` counts them, ``lexeme_records_store`` keeps them)."""
    generation = words_generation(word_rows)
    countable = list(dict.fromkeys(lexeme for _, _, candidates, _ in word_rows for lexeme in candidates or ()))
    if generation != _lexeme_records_generation:
        return generation, countable
    return generation, [lexeme for lexeme in countable if (generation, lexeme) not in _lexeme_records]


def lexeme_records_statement(lexemes: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """LEXEME_RECORDS_SQL for ``lexemes``, its parameters named apart, to ride in another message."""
    sql = LEXEME_RECORDS_SQL
    for name in ("lexemes", "families", "scan"):
        sql = sql.replace(f"%({name})s", f"%(lr_{name})s")
    return sql, {f"lr_{name}": value for name, value in _count_params(lexemes).items()}


def lexeme_records_store(generation: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Cache ``lexeme_records_statement``'s rows under content ``generation``."""
    global _lexeme_records_generation
    if not generation:
        return
    cache = _lexeme_records
    if generation != _lexeme_records_generation or len(cache) > LEXEME_RECORDS_CACHE_SIZE:
        cache.clear()
        _lexeme_records_generation = generation
    for lexeme, records in rows:
        cache[(generation, lexeme)] = int(records)


@dataclass(frozen=True)
class Topic:
    """What of a query may decide withheld: its topical lexemes and words (rare ones dropped)."""

    lexemes: tuple[str, ...]
    words: tuple[str, ...]
    all_words: bool  # nothing was dropped: the topical text is the query's own words


def _has_digit(text: str) -> bool:
    return any(unicodedata.category(ch).startswith("N") for ch in text)


def query_words(query: str) -> list[str]:
    """The words whose topic is weighed (WORDS_SQL's input)."""
    return _WORD.findall(query)[:MAX_TOPIC_WORDS]


def query_topic(
    cursor: CursorWrapper, words: Sequence[str], word_rows: Sequence[tuple[Any, ...]], *, min_records: int
) -> Topic:
    """The topical part of a query from its ``words`` and their WORDS_SQL rows: a word is kept when
    each of its lexemes holds no digit and is in at least ``min_records`` records."""
    if not words:
        return Topic((), (), True)
    generation = words_generation(word_rows)
    countable = [lexeme for _, _, candidates, _ in word_rows for lexeme in candidates or ()]
    records = lexeme_records(cursor, countable, generation) if countable else {}
    lexemes: list[str] = []
    kept: list[str] = []
    dropped = False
    for (_, word_lexemes, candidates, _), word in zip(word_rows, words, strict=True):
        if not word_lexemes:  # a stop word: carries nothing either way
            continue
        topical = {
            lexeme
            for lexeme in candidates or ()
            if records.get(lexeme, 0) >= max(1, min_records) and not _has_digit(lexeme)
        }
        if set(word_lexemes) <= topical:
            kept.append(word)
            lexemes.extend(lexeme for lexeme in word_lexemes if lexeme not in lexemes)
        else:
            dropped = True
    return Topic(tuple(lexemes[:MAX_QUERY_TERMS]), tuple(kept), not dropped)
