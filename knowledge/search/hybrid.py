"""Hybrid search (KS-3): the lexical and vector lists under the ACL, RRF-fused, plus withheld.

Nothing here filters rows in Python after the fact: each candidate list carries
``acl && principals`` in its WHERE clause, so the top-k is full even for a narrow identity.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection, transaction

from achilles.errors import ValidationFailed
from knowledge.contracts import MAX_K, MAX_QUERY_CHARS, Candidate, Identity, SearchResult, Withheld
from knowledge.fusion import rrf, withheld_chunk_ids
from knowledge.search.embedding import embed_query, search_embedding_config
from knowledge.search.lexical import lexical_lists, query_lexemes, unfiltered_top
from knowledge.search.vector import ef_search, vector_list
from knowledge.search.withheld import query_topic, semantic_hidden
from knowledge.selectors import is_empty, principals_of

DETAILS_SQL = """
SELECT c.id, c.record_id, r.source_system, r.author_principal_id,
       (c.acl && %(principals)s::text[]) AS visible,
       CASE WHEN c.acl && %(principals)s::text[] THEN r.title END,
       CASE WHEN c.acl && %(principals)s::text[] THEN r.url END,
       CASE WHEN c.acl && %(principals)s::text[] THEN c.text END,
       r.never_hint OR EXISTS (SELECT 1 FROM knowledge_source_policies p
                               WHERE p.source_system = r.source_system AND p.never_hint) AS never_hint
FROM knowledge_chunks c JOIN knowledge_records r ON r.id = c.record_id
WHERE c.id = ANY(%(ids)s)
"""


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
    with transaction.atomic(), connection.cursor() as cursor:
        topic = query_topic(cursor, query, min_records=settings.WITHHELD_MIN_RECORDS)
        lexemes = query_lexemes(cursor, query) if topic.lexemes else []
        # When the topic is the whole query, the lexical statements yield the unfiltered top-k too.
        same = bool(topic.lexemes) and set(topic.lexemes) == set(lexemes)
        lexical = lexical_lists(cursor, query, principals, depth, k if same else 0, ef_search=ef_search(depth))
        if lexical is not None:
            lists.append(lexical.visible)
        if config is not None and vector is not None:
            lists.append(vector_list(cursor, vector, principals, depth, config.min_similarity,
                                     extra=lexical.visible if lexical else (), configured=lexical is not None))
        fused = rrf(lists)[:k]
        hidden: list[int] = []
        if topic.lexemes:
            if same and lexical is not None:
                unfiltered, hidden_ids = lexical.unfiltered, lexical.hidden
            else:
                unfiltered, hidden_ids = unfiltered_top(cursor, topic.lexemes, principals, k)
            hidden = withheld_chunk_ids(unfiltered=[unfiltered], hidden=hidden_ids, k=k)
        if topic.words and config is not None and config.hint_floor is not None:
            topic_vector = vector if topic.all_words else embed_query(config, " ".join(topic.words))
            if topic_vector is not None:
                hidden += [c for c in semantic_hidden(cursor, topic_vector, principals, k, config.hint_floor)
                           if c not in hidden]
        ids = [chunk_id for chunk_id, _ in fused] + hidden
        details: dict[int, tuple[Any, ...]] = {}
        if ids:
            cursor.execute(DETAILS_SQL, {"principals": principals, "ids": ids})
            details = {row[0]: row for row in cursor.fetchall()}
    # Nothing matched at all: only now is emptiness worth a query (KS-7: no cache, no restart).
    empty = is_empty() if not any(lists) and not hidden else False

    candidates: list[Candidate] = []
    for chunk_id, score in fused:
        row = details.get(chunk_id)
        if row is None or not row[4]:  # deleted or re-ACLed between the statements
            continue
        candidates.append(Candidate(record_id=row[1], chunk_id=chunk_id, title=row[5], url=row[6] or "",
                                    source_system=row[2], text=row[7], score=round(score, 6),
                                    rank=len(candidates) + 1))
    withheld: list[Withheld] = []
    for chunk_id in hidden:
        row = details.get(chunk_id)
        if row is None or row[4] or row[8]:  # gone, visible after all, or never to be hinted
            continue
        coordinates = Withheld(source_system=row[2], author_principal_id=row[3])
        if coordinates not in withheld:
            withheld.append(coordinates)
    return SearchResult(candidates=tuple(candidates), withheld=tuple(withheld), is_empty=empty)
