"""Hybrid search (KS-3): the lexical and vector lists under the ACL, RRF-fused, plus withheld.

Nothing here filters rows in Python after the fact: each candidate list carries
``acl && principals`` in its WHERE clause, so the top-k is full even for a narrow identity.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection

from achilles import prepared
from achilles.errors import ValidationFailed
from knowledge.contracts import MAX_K, MAX_QUERY_CHARS, Candidate, Identity, SearchResult, Withheld
from knowledge.fusion import rrf, withheld_chunk_ids
from knowledge.search.embedding import EmbeddingConfig, embed_query, search_embedding_config
from knowledge.search.lexical import (
    LEXICAL_FIRST_SQL,
    apply_lower_levels,
    lexical_first,
    lexical_one_pass,
    lower_levels_statement,
    unfiltered_top,
)
from knowledge.search.vector import ranked_by_similarity, semantic_after, start_beside, vector_message
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
# where DETAIL_COLUMNS' visible flag sits in a lower-level row (filtered, level, score, similarity, …)
LEVEL_VISIBLE_AT = 8
LEVEL_SIMILARITY = (
    "CASE WHEN l.filtered AND c.embedding IS NOT NULL AND knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) "
    "THEN 1 - (c.embedding <=> %(vec)s::vector) END"
)
DETAILS_SQL = f"""
SELECT {DETAIL_COLUMNS}
FROM knowledge_chunks c JOIN knowledge_records r ON r.id = c.record_id
WHERE c.id = ANY(%(ids)s)
"""


def topic_semantic(
    topic: Topic, config: EmbeddingConfig | None, vector: list[float] | None, k: int
) -> tuple[list[float], int, float] | None:
    """The semantic side of withheld for ``topic``: (its vector, k, the model's hint floor), or None."""
    if not topic.words or config is None or config.hint_floor is None:
        return None
    topic_vector = vector if topic.all_words else embed_query(config, " ".join(topic.words))
    return (topic_vector, k, config.hint_floor) if topic_vector is not None else None


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
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailed("query must be a non-empty string", code="empty_query")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationFailed(f"query is longer than {MAX_QUERY_CHARS} characters", code="query_too_long")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValidationFailed(f"k must be an integer between 1 and {MAX_K}", code="invalid_k")
    query = query.replace("\x00", " ")

    config = search_embedding_config()
    vector = embed_query(config, query) if config else None
    depth = candidate_depth(k)
    lists: list[list[int]] = []
    words = query_words(query)
    # The nearest visible chunks need nothing from the lexical side: on a connection of their own,
    # they are read while the lexical statements below run (outside a transaction only: see
    # vector.py). So is the semantic side of withheld, on a third, for the query's own words — its
    # topic is known only later; the usual case is the whole query, and a query whose topic drops
    # words reads its own after (3) instead.
    pool = parallel_pool() if vector is not None else None
    beside = None
    if pool is not None and vector is not None:
        semantic_k = k if config is not None and config.hint_floor is not None and words else None
        beside = start_beside(pool, vector, principals, depth, DETAIL_COLUMNS, semantic_k)
    # Round trips: (1) the first lexical level, the query's lexemes and each word's lexemes; (2) the
    # words' record counts, only those not cached for this content generation (with statements
    # beside, they ride in (3) instead); (3) one message with its HNSW settings: the lower lexical
    # levels (only while a list is short), the vector list and the semantic side of withheld
    # (unless they ran beside), each row with its details, and the details of the first level's
    # candidates (with their similarity) and hidden rows. No BEGIN/COMMIT. (When withheld's topic
    # is not the whole query, its own lexical levels come before (3), or after it when deferred.)
    with connection.cursor() as cursor:
        first: dict[str, Any] = {"query": query, "principals": principals, "n_visible": depth, "n_all": k}
        # prepared once per connection: their results do not depend on the plan (total orders)
        if words:
            prepared.execute(cursor, [(LEXICAL_FIRST_SQL, True), (WORDS_SQL, True)], {**first, "words": words})
            first_rows = cursor.fetchall()
            cursor.nextset()
            word_rows = cursor.fetchall()
        else:
            prepared.execute(cursor, [(LEXICAL_FIRST_SQL, True)], first)
            first_rows, word_rows = cursor.fetchall(), []
        side, lexemes = lexical_first(first_rows)
        # The topic needs the words' record counts. Cached, it is known now; otherwise, beside the
        # vector jobs, the counts ride in (3) and the topic is settled after it, on a guess that it
        # is the whole query (checked then: a query whose topic drops words does the rest after).
        generation, uncounted = lexeme_records_missing(word_rows)
        defer = beside is not None and bool(uncounted) and bool(generation)
        topic = None if defer else query_topic(cursor, words, word_rows, min_records=settings.WITHHELD_MIN_RECORDS)
        # When the topic is the whole query, the lexical statements yield the unfiltered top-k too;
        # otherwise the first level's unfiltered rows are dropped and withheld has its own lists.
        same = bool(lexemes) if topic is None else bool(topic.lexemes) and set(topic.lexemes) == set(lexemes)
        if not same:
            side.unfiltered, side.hidden = [], set()
        # the lower levels, if a list is short, ride in the vector message, each row with its
        # details and (a lexical candidate competes for the vector list too) its similarity; a
        # selective identity's visible chain reads them in one pass (from estimates kept a minute)
        one_pass = bool(lexemes) and len(side.visible) < depth and lexical_one_pass(cursor, principals, lexemes)
        levels = (
            lower_levels_statement(
                side,
                lexemes,
                principals,
                depth,
                k if same else 0,
                DETAIL_COLUMNS,
                LEVEL_SIMILARITY if vector is not None else "NULL::float8",
                one_pass=one_pass,
            )
            if lexemes
            else None
        )
        semantic = topic_semantic(topic, config, vector, k) if topic is not None else None
        # withheld's own lexical lists when its topic is not the whole query
        other: tuple[list[int], set[int]] | None = None
        if topic is not None and topic.lexemes and not (same and lexemes):
            other = unfiltered_top(cursor, topic.lexemes, principals, k)
        known = list(dict.fromkeys(side.visible + [c for c in side.unfiltered if c in side.hidden]))
        if other is not None:
            known += [c for c in other[0] if c in other[1] and c not in known]
        rows = None
        if vector is not None or semantic is not None or levels is not None or known:
            rows = vector_message(
                cursor,
                vector,
                principals,
                depth,
                extra=side.visible,
                semantic=semantic,
                details=(DETAIL_COLUMNS, known),
                beside=beside,
                wrap_errors=lambda: connection.wrap_database_errors,
                # the levels prepared (their order is total); the counts not: which chunks their
                # LIMIT counts is the plan's choice, and a generic plan could change a word's topic
                more=[
                    (*m, prepare)
                    for m, prepare in ((levels, True), (lexeme_records_statement(uncounted) if defer else None, False))
                    if m is not None
                ],
            )
        details: dict[int, tuple[Any, ...]] = rows.found if rows is not None else {}
        similarity: dict[int, float] = rows.similarity if rows is not None else {}
        semantic_ids = rows.hidden if rows is not None else []
        level_rows = rows.more[0] if rows is not None and levels is not None else []
        if topic is None:  # deferred: the counts came with (3)
            lexeme_records_store(generation, rows.more[-1] if rows is not None else [])
            topic = query_topic(cursor, words, word_rows, min_records=settings.WITHHELD_MIN_RECORDS)
            if not (bool(topic.lexemes) and set(topic.lexemes) == set(lexemes)):
                # the guess was wrong: the unfiltered rows were read for a topic the query lacks
                side.unfiltered, side.hidden = [], set()
                level_rows = [row for row in level_rows if row[0]]
                if topic.lexemes:
                    other = unfiltered_top(cursor, topic.lexemes, principals, k)
            semantic = topic_semantic(topic, config, vector, k)
            if semantic is not None:
                semantic_ids, semantic_found = semantic_after(
                    cursor,
                    semantic,
                    principals,
                    depth,
                    DETAIL_COLUMNS,
                    beside,
                    wrap_errors=lambda: connection.wrap_database_errors,
                )
                details.update(semantic_found)
        if level_rows:
            apply_lower_levels(side, level_rows, visible_at=LEVEL_VISIBLE_AT)
            for level_row in level_rows:
                details[level_row[4]] = level_row[4:]
                if level_row[3] is not None:
                    similarity.setdefault(level_row[4], level_row[3])
        if lexemes:
            lists.append(side.visible)
        hidden: list[int] = []
        if topic.lexemes:
            unfiltered, hidden_ids = (side.unfiltered, side.hidden) if other is None else other
            hidden = withheld_chunk_ids(unfiltered=[unfiltered], hidden=hidden_ids, k=k)
        if config is not None and vector is not None:
            lists.append(ranked_by_similarity(similarity, config.min_similarity, depth))
        fused = rrf(lists)[:k]
        hidden += [c for c in semantic_ids if c not in hidden]
        # without the vector message (no embedding model), or a chunk deleted meanwhile: one more
        missing = [chunk_id for chunk_id, _ in fused if chunk_id not in details]
        missing += [chunk_id for chunk_id in hidden if chunk_id not in details]
        if missing:
            cursor.execute(DETAILS_SQL, {"principals": principals, "ids": missing})
            details.update((row[0], row) for row in cursor.fetchall())
    # Nothing matched at all: only now is emptiness worth a query (KS-7: no cache, no restart).
    empty = is_empty() if not any(lists) and not hidden else False

    candidates: list[Candidate] = []
    for chunk_id, score in fused:
        row = details.get(chunk_id)
        if row is None or not row[4]:  # deleted or re-ACLed between the statements
            continue
        candidates.append(
            Candidate(
                record_id=row[1],
                chunk_id=chunk_id,
                title=row[5],
                url=row[6] or "",
                source_system=row[2],
                text=row[7],
                score=round(score, 6),
                rank=len(candidates) + 1,
            )
        )
    withheld: list[Withheld] = []
    for chunk_id in hidden:
        row = details.get(chunk_id)
        if row is None or row[4] or row[8]:  # gone, visible after all, or never to be hinted
            continue
        coordinates = Withheld(source_system=row[2], author_principal_id=row[3])
        if coordinates not in withheld:
            withheld.append(coordinates)
    return SearchResult(candidates=tuple(candidates), withheld=tuple(withheld), is_empty=empty)
