"""Which hidden chunks are relevant to a question: decided from its topic, never from one rare token.

Issue 10: «PLUTONIUM» → hint, «URANIUM» → none, and a sweep of numbers lit up a colleague's salary.
Each query word is reduced to its lexemes; a lexeme is topical when it holds no digit and at least
WITHHELD_MIN_RECORDS records contain it (under any ACL: the count reveals only that a word is
common). Withheld is computed from the topical lexemes (and the topical words, for the semantic
side) alone, so replacing a number or a word found in fewer records by any other number or rare
word cannot change the answer. The record count stops after TOPIC_SCAN_CHUNKS matching chunks (a
word in that many chunks of fewer records counts as rare: the safe side).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.backends.utils import CursorWrapper

from knowledge.models import TEXT_SEARCH_CONFIG
from knowledge.search.lexical import MAX_QUERY_TERMS
from knowledge.search.vector import vector_literal

TOPIC_SCAN_CHUNKS = 200
MAX_TOPIC_WORDS = 64
_WORD = re.compile(r"\w+", re.UNICODE)

TOPIC_SQL = f"""
WITH w AS (
    SELECT t.ord, ARRAY(SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', t.word))) AS lexemes
    FROM unnest(%(words)s::text[]) WITH ORDINALITY AS t(word, ord)
),
l AS MATERIALIZED (
    SELECT x.lexeme,
           (SELECT count(DISTINCT s.record_id) FROM (
                SELECT c.record_id FROM knowledge_chunks c
                WHERE c.tsv @@ (chr(39) || x.lexeme || chr(39))::tsquery
                LIMIT %(scan)s) s) AS records
    FROM (SELECT DISTINCT y AS lexeme FROM w, unnest(w.lexemes) AS y
          WHERE y !~ '[[:digit:]]' AND strpos(y, chr(39)) = 0 AND strpos(y, chr(92)) = 0) x
)
SELECT w.ord, w.lexemes,
       ARRAY(SELECT l.lexeme FROM l WHERE l.lexeme = ANY(w.lexemes) AND l.records >= %(min_records)s)
FROM w ORDER BY w.ord
"""

# The semantic side of withheld: the nearest chunks to the topical words, visible or not.
VECTOR_ALL_SQL = """
SELECT id, 1 - (embedding <=> %(vec)s::vector) AS similarity, acl && %(principals)s::text[] AS visible
FROM knowledge_chunks
WHERE embedding IS NOT NULL
ORDER BY embedding <=> %(vec)s::vector
LIMIT %(n)s
"""


@dataclass(frozen=True)
class Topic:
    """What of a query may decide withheld: its topical lexemes and words (rare ones dropped)."""

    lexemes: tuple[str, ...]
    words: tuple[str, ...]
    all_words: bool  # nothing was dropped: the topical text is the query's own words


def _has_digit(text: str) -> bool:
    return any(unicodedata.category(ch).startswith("N") for ch in text)


def query_topic(cursor: CursorWrapper, query: str, *, min_records: int) -> Topic:
    """The topical part of ``query`` (see TOPIC_SQL); one statement."""
    words = _WORD.findall(query)[:MAX_TOPIC_WORDS]
    if not words:
        return Topic((), (), True)
    cursor.execute(TOPIC_SQL, {"words": words, "scan": TOPIC_SCAN_CHUNKS, "min_records": max(1, min_records)})
    lexemes: list[str] = []
    kept: list[str] = []
    dropped = False
    for (_, word_lexemes, topical), word in zip(cursor.fetchall(), words, strict=True):
        if not word_lexemes:  # a stop word: carries nothing either way
            continue
        topical = {lexeme for lexeme in topical if not _has_digit(lexeme)}
        if set(word_lexemes) <= topical:
            kept.append(word)
            lexemes.extend(lexeme for lexeme in word_lexemes if lexeme not in lexemes)
        else:
            dropped = True
    return Topic(tuple(lexemes[:MAX_QUERY_TERMS]), tuple(kept), not dropped)


def semantic_hidden(cursor: CursorWrapper, vector: Sequence[float], principals: list[str], k: int,
                    floor: float) -> list[int]:
    """Hidden chunks among the ``k`` nearest to ``vector`` (no ACL) whose similarity reaches ``floor``."""
    cursor.execute(VECTOR_ALL_SQL, {"vec": vector_literal(vector), "principals": principals, "n": k})
    return [chunk_id for chunk_id, similarity, visible in cursor.fetchall() if not visible and similarity >= floor]
