"""Hybrid search (KS-3): the lexical and vector lists under the ACL, RRF-fused, plus withheld.

Nothing here filters rows in Python after the fact: each candidate list carries
``acl && principals`` in its WHERE clause, so the top-k is full even for a narrow identity.

``search`` runs in three steps: ``plan_search`` (what is known before any round trip, and the
statements started beside the request), ``read`` (the round trips on the request's connection)
and ``assemble`` (the contract's dataclasses from the rows read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorWrapper

from achilles.errors import ValidationFailed
from knowledge.contracts import MAX_K, MAX_QUERY_CHARS, Candidate, Identity, SearchResult, Withheld
from knowledge.fusion import exact_first, withheld_chunk_ids
from knowledge.search.batch import Batch, Rows
from knowledge.search.embedding import EmbeddingConfig, embed_query, search_embedding_config
from knowledge.search.identifiers import ExactRow, exact_statement, query_identifiers
from knowledge.search.lexical import (
    LEXICAL_FIRST_SQL,
    LevelRow,
    SideLists,
    apply_lower_levels,
    lexical_first,
    lexical_one_pass,
    lower_levels_statement,
    unfiltered_top,
)
from knowledge.search.vector import (
    Beside,
    SemanticSide,
    VectorRows,
    ranked_by_similarity,
    semantic_after,
    start_beside,
    vector_message,
)
from knowledge.search.withheld import (
    WORDS_SQL,
    Topic,
    lexeme_records_missing,
    lexeme_records_statement,
    lexeme_records_store,
    query_topic,
    query_words,
)
from knowledge.selectors import is_empty, principals_of

# What a candidate is (title, url, text) and, for withheld, where it comes from (source, author,
# opt-outs); the visible flag decides which. Over ``c`` the chunk and ``r`` its record.
DETAIL_COLUMNS = """
c.id, c.record_id, r.source_system, r.author_principal_id,
(knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[])) AS visible,
CASE WHEN knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) THEN r.title END,
CASE WHEN knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) THEN r.url END,
CASE WHEN knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) THEN c.text END,
r.never_hint OR EXISTS (SELECT 1 FROM knowledge_source_policies p
                        WHERE p.source_system = r.source_system AND p.never_hint) AS never_hint
"""


class Detail:
    """Columns of a details row (DETAIL_COLUMNS), as every statement carrying them returns them
    from the chunk id on (``vector.NearestRow``, ``vector.SemanticRow``, ``lexical.LevelRow``)."""

    CHUNK_ID: Final = 0
    RECORD_ID: Final = 1
    SOURCE_SYSTEM: Final = 2
    AUTHOR_PRINCIPAL_ID: Final = 3
    VISIBLE: Final = 4
    TITLE: Final = 5  # NULL when not visible, as are URL and TEXT
    URL: Final = 6
    TEXT: Final = 7
    NEVER_HINT: Final = 8


# where DETAIL_COLUMNS' visible flag sits in a lower-level row (``LevelRow``, then the details)
LEVEL_VISIBLE_AT = LevelRow.CHUNK_ID + Detail.VISIBLE
LEVEL_SIMILARITY = (
    "CASE WHEN l.filtered AND c.embedding IS NOT NULL AND knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) "
    "THEN 1 - (c.embedding <=> %(vec)s::vector) END"
)
DETAILS_SQL = f"""
SELECT {DETAIL_COLUMNS}
FROM knowledge_chunks c JOIN knowledge_records r ON r.id = c.record_id
WHERE c.id = ANY(%(ids)s)
"""
# The result sets of the first message and the statements riding in the vector message.
FIRST, WORDS, EXACT = "first", "words", "exact"
LEVELS, COUNTS = "levels", "lexeme_records"


def topic_semantic(
    topic: Topic, config: EmbeddingConfig | None, vector: list[float] | None, k: int
) -> SemanticSide | None:
    """The semantic side of withheld for ``topic``: its vector, k and the model's hint floor, or None."""
    if not topic.words or config is None or config.hint_floor is None:
        return None
    topic_vector = vector if topic.all_words else embed_query(config, " ".join(topic.words))
    return SemanticSide(topic_vector, k, config.hint_floor) if topic_vector is not None else None


def parallel_pool() -> Any:
    """The connection pool a search may take more connections from, or None: none without a pool,
    when turned off (KS_SEARCH_PARALLEL), inside a transaction — whose uncommitted rows another
    connection would not see — or when the pool has no idle connection and cannot grow (the
    statements then stay on the request's connection rather than wait)."""
    if not settings.KS_SEARCH_PARALLEL or connection.in_atomic_block or not connection.get_autocommit():
        return None
    pool = getattr(connection, "pool", None)  # PostgreSQL only
    if pool is None:
        return None
    stats = pool.get_stats()
    if not stats.get("pool_available") and stats.get("pool_size", 0) >= pool.max_size:
        return None
    return pool


def candidate_depth(k: int) -> int:
    """How deep each candidate list goes before fusion."""
    return max(20, 2 * k)


def search(query: str, identity: Identity, k: int = 8) -> SearchResult:
    """Hybrid search (KS-3): lexical + vector lists under the ACL, RRF-fused, top ``k``.

    ``withheld``: hidden records relevant to the question's topic (``knowledge.search.withheld``),
    coordinates only, before the hint policy (rate and audit: ``knowledge.services.withheld_release``).
    """
    principals = principals_of(identity)
    plan = plan_search(valid_query(query, k), principals, k)
    with connection.cursor() as cursor:
        found = read(cursor, plan)
    # Nothing matched at all: only now is emptiness worth a query (KS-7: no cache, no restart).
    return assemble(found, empty=is_empty() if not found.matched else False)


def valid_query(query: str, k: int) -> str:
    """``query`` as searched (NULs are spaces), or ValidationFailed for it or for ``k``."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailed("query must be a non-empty string", code="empty_query")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationFailed(f"query is longer than {MAX_QUERY_CHARS} characters", code="query_too_long")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValidationFailed(f"k must be an integer between 1 and {MAX_K}", code="invalid_k")
    return query.replace("\x00", " ")


# ---------------------------------------------------------------- plan


@dataclass(frozen=True)
class SearchPlan:
    """What a search knows before its first round trip, and the jobs it started beside it."""

    query: str
    principals: list[str]
    k: int
    depth: int  # of each candidate list
    config: EmbeddingConfig | None
    vector: list[float] | None
    words: list[str]  # whose topic decides withheld
    beside: Beside | None
    identifiers: list[str] = field(default_factory=list)  # matched exactly and first (``identifiers``)


def plan_search(query: str, principals: list[str], k: int) -> SearchPlan:
    """The query's vector and words; and, on connections of their own, the nearest visible chunks —
    they need nothing from the lexical side — and the semantic side of withheld for the query's own
    words (its topic is known only later; the usual case is the whole query, and a query whose topic
    drops words reads its own after the last message instead). Beside only outside a transaction
    (``parallel_pool``; see vector.py)."""
    config = search_embedding_config()
    vector = embed_query(config, query) if config else None
    depth = candidate_depth(k)
    words = query_words(query)
    pool = parallel_pool() if vector is not None else None
    beside = None
    if pool is not None and vector is not None:
        semantic_k = k if config is not None and config.hint_floor is not None and words else None
        beside = start_beside(pool, vector, principals, depth, DETAIL_COLUMNS, semantic_k)
    return SearchPlan(query, principals, k, depth, config, vector, words, beside, query_identifiers(query))


# ---------------------------------------------------------------- read


@dataclass
class Reading:
    """What the round trips of one search found so far (``read``)."""

    side: SideLists  # the lexical lists
    lexemes: list[str]  # the query's
    word_rows: Rows  # WORDS_SQL's
    topic: Topic | None = None  # None while deferred: its record counts ride in the last message
    other: tuple[list[int], set[int]] | None = None  # withheld's own lexical lists (``unfiltered_top``)
    details: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # chunk id → ``Detail`` row
    similarity: dict[int, float] = field(default_factory=dict)  # the vector list's candidates
    semantic_ids: list[int] = field(default_factory=list)  # the semantic side of withheld
    level_rows: Rows = field(default_factory=list)  # the lower lexical levels (``LevelRow``)
    exact: list[int] = field(default_factory=list)  # visible chunks holding a named identifier

    def took(self, rows: VectorRows | None) -> Rows:
        """What the last message read (``last_message``) kept here; returns the deferred counts."""
        if rows is None:
            return []
        self.details, self.similarity, self.semantic_ids = rows.found, rows.similarity, rows.hidden
        self.level_rows = rows.more.get(LEVELS, [])
        return rows.more.get(COUNTS, [])


@dataclass(frozen=True)
class Found:
    """What ``read`` hands to ``assemble``: the fused top k, the hidden chunks, their details."""

    fused: list[tuple[int, float]]
    hidden: list[int]
    details: dict[int, tuple[Any, ...]]
    matched: bool  # a list or withheld found anything (else emptiness is asked)


def read(cursor: CursorWrapper, plan: SearchPlan) -> Found:
    """The round trips on the request's connection: (1) the first lexical level, the query's
    lexemes and each word's lexemes; (2) the words' record counts, only those not cached for this
    content generation (with statements beside, they ride in (3) instead: ``deferred``); (3) one
    message with its HNSW settings: the lower lexical levels (only while a list is short), the
    vector list and the semantic side of withheld (unless they ran beside), each row with its
    details, and the details of the first level's candidates (with their similarity) and hidden
    rows. No BEGIN/COMMIT. (1) also reads, when the query names identifiers, the visible chunks
    holding them (``identifiers``), which the fusion puts first. (When withheld's topic is not the whole query, its own lexical levels
    come before (3), or after it when deferred.) Then the lists are fused, and the details of any
    chunk still without them read (no embedding model, or a chunk deleted meanwhile)."""
    reading = first_message(cursor, plan)
    # The topic needs the words' record counts. Cached, it is known now; otherwise, beside the
    # vector jobs, the counts ride in (3) and the topic is settled after it, on a guess that it
    # is the whole query (checked then: a query whose topic drops words does the rest after).
    generation, uncounted = lexeme_records_missing(reading.word_rows)
    deferred = plan.beside is not None and bool(uncounted) and bool(generation)
    if not deferred:
        reading.topic = query_topic(cursor, plan.words, reading.word_rows, min_records=settings.WITHHELD_MIN_RECORDS)
    # When the topic is the whole query, the lexical statements yield the unfiltered top-k too;
    # otherwise the first level's unfiltered rows are dropped and withheld has its own lists.
    same = _topic_is_query(reading.topic, reading.lexemes) if reading.topic is not None else bool(reading.lexemes)
    if not same:
        reading.side.unfiltered, reading.side.hidden = [], set()
    rows = last_message(cursor, plan, reading, same=same, counts=uncounted if deferred else None)
    counts = reading.took(rows)
    if reading.topic is None:
        settle_deferred(cursor, plan, reading, generation, counts)
    merge_levels(reading)
    lists, hidden = candidate_lists(plan, reading)
    fused = exact_first(reading.exact, lists)[: plan.k]
    hidden += [chunk_id for chunk_id in reading.semantic_ids if chunk_id not in hidden]
    details_fill(cursor, plan.principals, [chunk_id for chunk_id, _ in fused] + hidden, reading.details)
    return Found(fused, hidden, reading.details, any(lists) or bool(hidden) or bool(reading.exact))


def details_fill(cursor: CursorWrapper, principals: list[str], ids: list[int], details: dict[int, Any]) -> None:
    """The details of ``ids`` not in ``details`` yet, read into it (one more round trip, if any)."""
    missing = [chunk_id for chunk_id in ids if chunk_id not in details]
    if missing:
        cursor.execute(DETAILS_SQL, {"principals": principals, "ids": missing})
        details.update((row[Detail.CHUNK_ID], row) for row in cursor.fetchall())


def _topic_is_query(topic: Topic, lexemes: list[str]) -> bool:
    return bool(topic.lexemes) and set(topic.lexemes) == set(lexemes)


def first_message(cursor: CursorWrapper, plan: SearchPlan) -> Reading:
    """(1): the first lexical level and the query's lexemes, and (with words) each word's lexemes;
    prepared once per connection: their results do not depend on the plan (total orders)."""
    params = {"query": plan.query, "principals": plan.principals, "n_visible": plan.depth, "n_all": plan.k}
    batch = Batch(params).add(FIRST, LEXICAL_FIRST_SQL, prepare=True)
    if plan.words:
        batch.add(WORDS, WORDS_SQL, prepare=True, params={"words": plan.words})
    if plan.identifiers:
        sql, exact_params = exact_statement(plan.identifiers)
        batch.add(EXACT, sql, prepare=False, params=exact_params)
    sets = batch.run(cursor)
    side, lexemes = lexical_first(sets[FIRST])
    exact = [row[ExactRow.CHUNK_ID] for row in sets.get(EXACT, [])]
    return Reading(side, lexemes, sets.get(WORDS, []), exact=exact)


def last_message(
    cursor: CursorWrapper, plan: SearchPlan, reading: Reading, *, same: bool, counts: list[str] | None
) -> VectorRows | None:
    """(3), when there is anything to read: the lower levels if a list is short, each row with its
    details and (a lexical candidate competes for the vector list too) its similarity — a selective
    identity's visible chain reads them in one pass (from estimates kept a minute); ``counts``: the
    deferred record counts; withheld's own lexical lists first when its topic is not the query's."""
    levels = levels_statement(cursor, plan, reading, same=same)
    topic = reading.topic
    semantic = topic_semantic(topic, plan.config, plan.vector, plan.k) if topic is not None else None
    if topic is not None and topic.lexemes and not (same and reading.lexemes):
        reading.other = unfiltered_top(cursor, topic.lexemes, plan.principals, plan.k)
    known = known_ids(reading)
    if plan.vector is None and semantic is None and levels is None and not known:
        return None
    # the levels prepared (their order is total); the counts not: which chunks their LIMIT counts
    # is the plan's choice, and a generic plan could change a word's topic
    more: dict[str, tuple[str, dict[str, Any], bool]] = {}
    if levels is not None:
        more[LEVELS] = (*levels, True)
    if counts is not None:
        more[COUNTS] = (*lexeme_records_statement(counts), False)
    return vector_message(
        cursor,
        plan.vector,
        plan.principals,
        plan.depth,
        extra=reading.side.visible,
        semantic=semantic,
        details=(DETAIL_COLUMNS, known),
        beside=plan.beside,
        wrap_errors=lambda: connection.wrap_database_errors,
        more=more,
    )


def levels_statement(
    cursor: CursorWrapper, plan: SearchPlan, reading: Reading, *, same: bool
) -> tuple[str, dict[str, Any]] | None:
    """The lower levels (``lower_levels_statement``), or None: the unfiltered list only when the
    topic is the query (``same``); a selective identity's visible chain in one pass."""
    side, lexemes = reading.side, reading.lexemes
    if not lexemes:
        return None
    one_pass = len(side.visible) < plan.depth and lexical_one_pass(cursor, plan.principals, lexemes)
    return lower_levels_statement(
        side,
        lexemes,
        plan.principals,
        plan.depth,
        plan.k if same else 0,
        DETAIL_COLUMNS,
        LEVEL_SIMILARITY if plan.vector is not None else "NULL::float8",
        one_pass=one_pass,
    )


def known_ids(reading: Reading) -> list[int]:
    """The chunks the lexical side found whose details the last message reads by id: the visible
    candidates, then the hidden ones of the unfiltered list(s)."""
    side = reading.side
    known = list(dict.fromkeys(side.visible + [c for c in side.unfiltered if c in side.hidden]))
    if reading.other is not None:
        ranked, hidden = reading.other
        known += [c for c in ranked if c in hidden and c not in known]
    return known


def settle_deferred(cursor: CursorWrapper, plan: SearchPlan, reading: Reading, generation: str, counts: Rows) -> None:
    """The topic whose record ``counts`` came with (3). The unfiltered rows were read on the guess
    that it is the whole query: when it is not, they go, and withheld reads its own lists; then the
    semantic side for the topic (read beside already when the topic is the query's words)."""
    lexeme_records_store(generation, counts)
    topic = reading.topic = query_topic(
        cursor, plan.words, reading.word_rows, min_records=settings.WITHHELD_MIN_RECORDS
    )
    if not _topic_is_query(topic, reading.lexemes):
        reading.side.unfiltered, reading.side.hidden = [], set()
        reading.level_rows = [row for row in reading.level_rows if row[LevelRow.FILTERED]]
        if topic.lexemes:
            reading.other = unfiltered_top(cursor, topic.lexemes, plan.principals, plan.k)
    semantic = topic_semantic(topic, plan.config, plan.vector, plan.k)
    if semantic is not None:
        reading.semantic_ids, semantic_found = semantic_after(
            cursor,
            semantic,
            plan.principals,
            plan.depth,
            DETAIL_COLUMNS,
            plan.beside,
            wrap_errors=lambda: connection.wrap_database_errors,
        )
        reading.details.update(semantic_found)


def merge_levels(reading: Reading) -> None:
    """The lower levels' rows into the lexical lists, their details and (visible ones) similarity."""
    if not reading.level_rows:
        return
    apply_lower_levels(reading.side, reading.level_rows, visible_at=LEVEL_VISIBLE_AT)
    details, similarity = reading.details, reading.similarity
    for row in reading.level_rows:
        chunk_id = row[LevelRow.CHUNK_ID]
        details[chunk_id] = row[LevelRow.CHUNK_ID :]
        if row[LevelRow.SIMILARITY] is not None:
            similarity.setdefault(chunk_id, row[LevelRow.SIMILARITY])


def candidate_lists(plan: SearchPlan, reading: Reading) -> tuple[list[list[int]], list[int]]:
    """The ranked lists to fuse (lexical, vector) and the lexically relevant hidden chunks."""
    assert reading.topic is not None  # settled by now
    lists: list[list[int]] = []
    if reading.lexemes:
        lists.append(reading.side.visible)
    hidden: list[int] = []
    if reading.topic.lexemes:
        unfiltered, hidden_ids = (
            (reading.side.unfiltered, reading.side.hidden) if reading.other is None else reading.other
        )
        hidden = withheld_chunk_ids(unfiltered=[unfiltered], hidden=hidden_ids, k=plan.k)
    if plan.config is not None and plan.vector is not None:
        lists.append(ranked_by_similarity(reading.similarity, plan.config.min_similarity_for(plan.query), plan.depth))
    return lists, hidden


# ---------------------------------------------------------------- assemble


def assemble(found: Found, *, empty: bool) -> SearchResult:
    """The candidates in fused order and the withheld coordinates, from their details rows: a chunk
    deleted or re-ACLed between the statements is left out, as is a hidden one never to be hinted."""
    details = found.details
    candidates: list[Candidate] = []
    for chunk_id, score in found.fused:
        row = details.get(chunk_id)
        if row is None or not row[Detail.VISIBLE]:  # deleted or re-ACLed between the statements
            continue
        candidates.append(
            Candidate(
                record_id=row[Detail.RECORD_ID],
                chunk_id=chunk_id,
                title=row[Detail.TITLE],
                url=row[Detail.URL] or "",
                source_system=row[Detail.SOURCE_SYSTEM],
                text=row[Detail.TEXT],
                score=round(score, 6),
                rank=len(candidates) + 1,
            )
        )
    withheld: list[Withheld] = []
    for chunk_id in found.hidden:
        row = details.get(chunk_id)
        if row is None or row[Detail.VISIBLE] or row[Detail.NEVER_HINT]:  # gone, visible after all, never hinted
            continue
        coordinates = Withheld(
            source_system=row[Detail.SOURCE_SYSTEM], author_principal_id=row[Detail.AUTHOR_PRINCIPAL_ID]
        )
        if coordinates not in withheld:
            withheld.append(coordinates)
    return SearchResult(candidates=tuple(candidates), withheld=tuple(withheld), is_empty=empty)
