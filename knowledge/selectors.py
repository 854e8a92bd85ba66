"""Reads of the Knowledge Store with the ACL built into every SQL statement (KS-3/4/5/7).

Nothing here filters rows in Python after the fact: each candidate list carries
``acl && principals`` in its WHERE clause, so the top-k is full even for a narrow identity.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection, transaction

from achilles.errors import NotFound, ValidationFailed
from knowledge.facade import Candidate, GraphNode, GraphResult, Identity, SearchResult, Withheld
from knowledge.fusion import Hit, rrf, withheld_chunk_ids
from knowledge.models import EMBEDDING_DIM, TEXT_SEARCH_CONFIG

logger = logging.getLogger(__name__)

MAX_K = 50
MAX_QUERY_CHARS = 2000
MAX_QUERY_TERMS = 32
MAX_GRAPH_DEPTH = 2
_WORD = re.compile(r"\w+", re.UNICODE)


def is_empty() -> bool:
    """True until the first chunk is stored; one index probe, no cache (flips with no restart)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT NOT EXISTS (SELECT 1 FROM knowledge_chunks)")
        return bool(cursor.fetchone()[0])


def principals_of(identity: Identity) -> list[str]:
    if not isinstance(identity, Identity):
        raise ValidationFailed("identity must be a knowledge.facade.Identity", code="invalid_identity")
    return sorted(identity.principals)


def tsquery_text(query: str) -> str:
    """The words of a free-text query OR-ed for ``to_tsquery`` (stop words drop out in PG).

    Only ``\\w+`` runs reach PostgreSQL, quoted, so no tsquery operator can be injected.
    """
    words: list[str] = []
    for word in _WORD.findall(query.lower()):
        word = word.replace("_", " ").strip()
        if word and word not in words:
            words.append(word)
    return " | ".join(f"'{word}'" for word in words[:MAX_QUERY_TERMS])


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


# --------------------------------------------------------------------------- embeddings

@dataclass(frozen=True)
class EmbeddingConfig:
    """The default embedding model, if any; ``min_similarity`` floors the vector list."""

    name: str
    provider: object
    min_similarity: float


def embedding_config() -> EmbeddingConfig | None:
    """The default ``agent_models`` row of kind embedding as a provider, or None (lexical only)."""
    from achilles.llm.registry import get_embedding_provider
    from achilles.models import AgentModel

    row = AgentModel.objects.filter(kind="embedding", is_default=True).first()
    if row is None:
        return None
    spec = row.spec()
    return EmbeddingConfig(name=row.name, provider=get_embedding_provider(spec),
                           min_similarity=float(spec.options.get("min_similarity", -1.0)))


def embed_query(config: EmbeddingConfig, query: str) -> list[float] | None:
    """The query's vector, or None when the provider fails (search degrades to lexical)."""
    try:
        vector = config.provider.embed([query])[0]
    except Exception:  # a provider outage must not take search down with it
        logger.warning("embedding the query with %s failed; lexical only", config.name, exc_info=True)
        return None
    if len(vector) != EMBEDDING_DIM:
        logger.warning("embedding model %s returned %d dims, the store keeps %d; lexical only",
                       config.name, len(vector), EMBEDDING_DIM)
        return None
    return vector


# --------------------------------------------------------------------------- search

# One scan of the lexical matches gives both lists: the visible top-N (the candidates) and the
# unfiltered top-N (for withheld), so a broad and a narrow identity cost the same here.
LEXICAL_SQL = f"""
WITH q AS (SELECT to_tsquery('{TEXT_SEARCH_CONFIG}', %(tsq)s) AS query),
m AS MATERIALIZED (
    SELECT c.id, ts_rank(c.tsv, q.query, 1) AS score, c.acl && %(principals)s::text[] AS visible
    FROM knowledge_chunks c, q
    WHERE c.tsv @@ q.query
)
(SELECT true AS filtered, id, score, visible FROM m WHERE visible ORDER BY score DESC, id LIMIT %(n)s)
UNION ALL
(SELECT false, id, score, visible FROM m ORDER BY score DESC, id LIMIT %(n)s)
"""

# HNSW for both; the filtered one relies on pgvector's iterative scan to fill N under a narrow ACL.
VECTOR_SQL = """
(SELECT true AS filtered, id, 1 - (embedding <=> %(vec)s::vector) AS score, true AS visible
 FROM knowledge_chunks
 WHERE embedding IS NOT NULL AND acl && %(principals)s::text[]
 ORDER BY embedding <=> %(vec)s::vector LIMIT %(n)s)
UNION ALL
(SELECT false, id, 1 - (embedding <=> %(vec)s::vector), acl && %(principals)s::text[]
 FROM knowledge_chunks
 WHERE embedding IS NOT NULL
 ORDER BY embedding <=> %(vec)s::vector LIMIT %(n)s)
"""

DETAILS_SQL = """
SELECT c.id, c.record_id, r.source_system, r.author_principal_id,
       (c.acl && %(principals)s::text[]) AS visible,
       CASE WHEN c.acl && %(principals)s::text[] THEN r.title END,
       CASE WHEN c.acl && %(principals)s::text[] THEN r.url END,
       CASE WHEN c.acl && %(principals)s::text[] THEN c.text END
FROM knowledge_chunks c JOIN knowledge_records r ON r.id = c.record_id
WHERE c.id = ANY(%(ids)s)
"""


@dataclass(frozen=True)
class SideLists:
    """One side's visible top-N and unfiltered top-N (hits carry raw scores)."""

    visible: list[Hit]
    unfiltered_hidden: list[Hit]
    unfiltered_visible: list[Hit]


def _side(rows, floor: float | None = None) -> SideLists:
    visible, hidden, unfiltered_visible = [], [], []
    for filtered, chunk_id, score, is_visible in rows:
        if floor is not None and score < floor:
            continue
        hit = Hit(int(chunk_id), float(score))
        if filtered:
            visible.append(hit)
        elif is_visible:
            unfiltered_visible.append(hit)
        else:
            hidden.append(hit)
    # relaxed_order iterative scans may return neighbours slightly out of order
    visible.sort(key=lambda h: (-h.score, h.chunk_id))
    return SideLists(visible, hidden, unfiltered_visible)


def candidate_depth(k: int) -> int:
    """How deep each candidate list goes before fusion."""
    return max(20, 2 * k)


def search(query: str, identity: Identity, k: int = 8) -> SearchResult:
    """Hybrid search (KS-3): lexical + vector lists under the ACL, RRF-fused, top ``k``."""
    principals = principals_of(identity)
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailed("query must be a non-empty string", code="empty_query")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationFailed(f"query is longer than {MAX_QUERY_CHARS} characters", code="query_too_long")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValidationFailed(f"k must be an integer between 1 and {MAX_K}", code="invalid_k")
    if is_empty():
        return SearchResult(candidates=(), withheld=(), is_empty=True)

    config = embedding_config()
    vector = embed_query(config, query) if config else None
    depth = candidate_depth(k)
    tsq = tsquery_text(query)
    sides: list[SideLists] = []
    with transaction.atomic(), connection.cursor() as cursor:
        if tsq:
            cursor.execute(LEXICAL_SQL, {"tsq": tsq, "principals": principals, "n": depth})
            sides.append(_side(cursor.fetchall()))
        if vector is not None:
            # Iterative scan: keep walking the HNSW graph until N rows pass the ACL filter.
            cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                           " set_config('hnsw.ef_search', %s, true)", [str(max(40, depth))])
            cursor.execute(VECTOR_SQL, {"vec": vector_literal(vector), "principals": principals, "n": depth})
            sides.append(_side(cursor.fetchall(), floor=config.min_similarity))
        fused = rrf([[hit.chunk_id for hit in side.visible] for side in sides])[:k]
        hidden = withheld_chunk_ids(
            visible=[side.unfiltered_visible for side in sides],
            hidden=[side.unfiltered_hidden for side in sides],
            k=k, depth=depth,
        )
        ids = [chunk_id for chunk_id, _ in fused] + hidden
        details = {}
        if ids:
            cursor.execute(DETAILS_SQL, {"principals": principals, "ids": ids})
            details = {row[0]: row for row in cursor.fetchall()}

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
        if row is None or row[4]:
            continue
        coordinates = Withheld(source_system=row[2], author_principal_id=row[3])
        if coordinates not in withheld:
            withheld.append(coordinates)
    return SearchResult(candidates=tuple(candidates), withheld=tuple(withheld), is_empty=False)


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
