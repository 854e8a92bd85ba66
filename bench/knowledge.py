"""bench/knowledge: our ``search`` against two peers, each tuned to the same recall (issue 15).

The dataset: ``BENCH_KS_CHUNKS`` (100k) chunks of synthetic Russian-like text in records of five
chunks, 384-dim hash embeddings and a realistic ACL spread, built once and kept in the database
``bench_knowledge`` (bench/chat shares it). Three identities: broad (≈ 63 % of the chunks visible),
narrow (1 %) and anonymous (``public``, 5 %).

Three sides, all on the same tables and indexes, each with the identity's ACL inside its SQL:
  * **ours** — ``knowledge.facade.search``: titles, urls, texts, withheld coordinates, hint policy;
  * **bare peer** — pgvector-python's published hybrid RRF query (two CTEs + FULL OUTER JOIN),
    pgvector defaults but ``hnsw.ef_search`` (set once per session, as its user would): chunk ids;
  * **complete peer** — the bare query plus what its user must add to return what ours returns:
    the candidates' titles, urls and texts in one more query, and the withheld records the obvious
    way (the same hybrid query without the ACL filter; the hits the identity may not see, as
    distinct (source system, author)).

For each identity and each ``hnsw.ef_search`` of the sweep (``BENCH_KS_EF``), recall@10 of each
side's vector list against exact search (the same ACL, no index: ``enable_indexscan = off``) and
the p95 of every side; then, per side, the lowest ef reaching recall@10 ≥ 0.95 and the p50/p95 of
all three at those settings, interleaved query by query (the order rotates) in one run.
``BENCH_KS_SCALE=1`` adds the growth table at ``BENCH_KS_SCALE_SIZES`` (10k, 100k, 300k; add
1000000 for a million) in scratch databases (each a copy of the largest dataset already built
below its size, extended; created and dropped here, kept for the next run with
``BENCH_KS_SCALE_KEEP=1``): HNSW build time and size, and for four identities that may read
100 %, 10 %, 1 % and 0.1 % of the store, recall@8 against exact search under the same ACL and
p50/p95 of four sides interleaved — ours, the plain pgvector query with the ACL in ``WHERE`` (no
iterative scan), the same with ``hnsw.iterative_scan = relaxed_order``, and the complete peer —
every side at ours' production ef (``BENCH_KS_SCALE_EF``), the plan ours took and the load
average beside each size; ``BENCH_KS_SCALE_EF_SWEEP`` adds ours' recall and p95 at more ef where
its plan walks the graph. The last line is ``RESULT {json}`` (the table under ``scale``).

    make bench            # every benchmark
    python -m bench knowledge
    BENCH_KS_CHUNKS=20000 BENCH_KS_QUERIES=100 python -m bench knowledge   # quicker, smaller
    BENCH_KS_DB=bench_ks_20000 BENCH_KS_CHUNKS=20000 python -m bench knowledge  # 20k beside the 100k
    BENCH_KS_SCALE=1 BENCH_KS_SCALE_KEEP=1 BENCH_KS_SCALE_SIZES=10000,100000,300000,1000000 \
        python -m bench knowledge                                          # the growth table to 1M
"""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

DATASET_VERSION = "v3"
CHUNKS = int(os.environ.get("BENCH_KS_CHUNKS", "100000"))
CHUNKS_PER_RECORD = 5
QUERIES = int(os.environ.get("BENCH_KS_QUERIES", "200"))
# the sweep's queries per (identity, ef), and the share of them whose recall is measured
SWEEP_QUERIES = int(os.environ.get("BENCH_KS_SWEEP_QUERIES", str(min(QUERIES, 100))))
K = 8
EF_SWEEP = tuple(int(x) for x in os.environ.get("BENCH_KS_EF", "20,40,60,80,120,160,250,400,600,800").split(","))
TARGET_RECALL = 0.95
RECALL_AT = 10
SCALE = os.environ.get("BENCH_KS_SCALE", "") not in ("", "0")
SCALE_SIZES = tuple(int(x) for x in os.environ.get("BENCH_KS_SCALE_SIZES", "10000,100000,300000").split(","))
# keep each size's scratch database for the next run (a 300k build is ≈ 5 min), reused while its
# dataset is the same; its build times are then the ones recorded when it was built
SCALE_KEEP = os.environ.get("BENCH_KS_SCALE_KEEP", "") not in ("", "0")
# the growth table: queries per identity and size, how many of them measure recall, and the ef of
# every side (0: ours' production HNSW_EF_SEARCH)
SCALE_QUERIES = int(os.environ.get("BENCH_KS_SCALE_QUERIES", "100"))
SCALE_RECALL_QUERIES = int(os.environ.get("BENCH_KS_SCALE_RECALL_QUERIES", "50"))
SCALE_EF = int(os.environ.get("BENCH_KS_SCALE_EF", "0"))
# only the growth table (no equal-recall run at BENCH_KS_CHUNKS); only build its databases (no measuring)
SCALE_ONLY = os.environ.get("BENCH_KS_SCALE_ONLY", "") not in ("", "0")
SCALE_BUILD_ONLY = os.environ.get("BENCH_KS_SCALE_BUILD_ONLY", "") not in ("", "0")
# more ef for ours where its plan walks the graph: recall and p95 of each (empty: none)
SCALE_EF_SWEEP = tuple(int(x) for x in os.environ.get("BENCH_KS_SCALE_EF_SWEEP", "").split(",") if x)
SEED = 20261129
GROUPS = [f"group:g{i}" for i in range(20)]
USERS = [f"user:{1000 + i}" for i in range(500)]
# the dataset's database: another name keeps a second size beside the 100k one (a different
# BENCH_KS_CHUNKS in the same database rebuilds it)
DB_NAME = os.environ.get("BENCH_KS_DB", "bench_knowledge")
ROOT = Path(__file__).resolve().parent.parent

IDENTITIES = {
    # a signed-in employee in two groups: sees `everyone`, `public`, their groups and own records
    "broad": frozenset({"everyone", "public", "group:g1", "group:g2", "user:1001"}),
    # a contractor-like principal set that sees 1 % of the records
    "narrow": frozenset({"group:narrow"}),
    "anonymous": frozenset({"public"}),
}

# The growth table's identities, by the share of the store they may read (the dataset's ACL spread:
# 1 % `group:narrow`, 5 % `public`, 55 % `everyone`, 30 % one of 20 groups, 9 % one of 500 users).
SCALE_IDENTITIES = {
    "100%": frozenset({"everyone", "public", "group:narrow", *GROUPS, *USERS}),
    "10%": frozenset({"group:narrow", *GROUPS[:6]}),
    "1%": frozenset({"group:narrow"}),
    "0.1%": frozenset(USERS[:6]),
}
# ours (the whole search), the plain pgvector query with the ACL in WHERE, the same with
# hnsw.iterative_scan, and the complete peer
SCALE_SIDES = ("ours", "plain", "iterative", "complete")

# pgvector-python's examples/hybrid_search/rrf.py, on our tables, with the ACL in both CTEs
PEER_SQL = """
WITH semantic_search AS (
    SELECT id, RANK () OVER (ORDER BY embedding <=> %(embedding)s::vector) AS rank
    FROM knowledge_chunks
    WHERE acl && %(principals)s::text[]
    ORDER BY embedding <=> %(embedding)s::vector
    LIMIT 20
),
keyword_search AS (
    SELECT id, RANK () OVER (ORDER BY ts_rank_cd(tsv, query) DESC)
    FROM knowledge_chunks, plainto_tsquery('russian', %(query)s) query
    WHERE tsv @@ query AND acl && %(principals)s::text[]
    ORDER BY ts_rank_cd(tsv, query) DESC
    LIMIT 20
)
SELECT
    COALESCE(semantic_search.id, keyword_search.id) AS id,
    COALESCE(1.0 / (%(k)s + semantic_search.rank), 0.0) +
    COALESCE(1.0 / (%(k)s + keyword_search.rank), 0.0) AS score
FROM semantic_search
FULL OUTER JOIN keyword_search ON semantic_search.id = keyword_search.id
ORDER BY score DESC
LIMIT %(limit)s
"""
# The complete peer's second query: what the candidates are (ours returns them with the ranking).
PEER_DETAILS_SQL = """
SELECT c.id, c.record_id, r.title, r.url, r.source_system, c.text
FROM knowledge_chunks c JOIN knowledge_records r ON r.id = c.record_id
WHERE c.id = ANY(%(ids)s)
"""
# Its third: withheld the obvious way — the same hybrid query without the ACL, and of its top k
# the chunks the identity may not see, as coordinates (opted-out records left out, as ours does).
PEER_WITHHELD_SQL = """
WITH semantic_search AS (
    SELECT id, RANK () OVER (ORDER BY embedding <=> %(embedding)s::vector) AS rank
    FROM knowledge_chunks
    ORDER BY embedding <=> %(embedding)s::vector
    LIMIT 20
),
keyword_search AS (
    SELECT id, RANK () OVER (ORDER BY ts_rank_cd(tsv, query) DESC)
    FROM knowledge_chunks, plainto_tsquery('russian', %(query)s) query
    WHERE tsv @@ query
    ORDER BY ts_rank_cd(tsv, query) DESC
    LIMIT 20
),
top AS (
    SELECT
        COALESCE(semantic_search.id, keyword_search.id) AS id,
        COALESCE(1.0 / (%(k)s + semantic_search.rank), 0.0) +
        COALESCE(1.0 / (%(k)s + keyword_search.rank), 0.0) AS score
    FROM semantic_search
    FULL OUTER JOIN keyword_search ON semantic_search.id = keyword_search.id
    ORDER BY score DESC
    LIMIT %(limit)s
)
SELECT DISTINCT r.source_system, r.author_principal_id
FROM top JOIN knowledge_chunks c ON c.id = top.id JOIN knowledge_records r ON r.id = c.record_id
WHERE NOT (c.acl && %(principals)s::text[]) AND NOT r.never_hint
"""
PEER_VECTOR_SQL = """
SELECT id FROM knowledge_chunks WHERE acl && %(principals)s::text[]
ORDER BY embedding <=> %(embedding)s::vector LIMIT 20
"""
EXACT_SQL = """
SELECT id FROM knowledge_chunks WHERE embedding IS NOT NULL AND acl && %(principals)s::text[]
ORDER BY embedding <=> %(embedding)s::vector, id LIMIT %(n)s
"""
EXACT_ALL_SQL = """
SELECT id FROM knowledge_chunks WHERE embedding IS NOT NULL
ORDER BY embedding <=> %(embedding)s::vector, id LIMIT %(n)s
"""
# the plain pgvector query: the ACL in WHERE, the top k by the HNSW index (iterative scan off or on)
PLAIN_SQL = """
SELECT id FROM knowledge_chunks WHERE acl && %(principals)s::text[]
ORDER BY embedding <=> %(embedding)s::vector LIMIT %(k)s
"""


# --------------------------------------------------------------------------- synthetic corpus

STOP = [
    "и",
    "в",
    "не",
    "на",
    "что",
    "с",
    "по",
    "как",
    "это",
    "к",
    "но",
    "из",
    "у",
    "за",
    "от",
    "о",
    "так",
    "же",
    "для",
    "все",
    "до",
    "она",
    "вы",
    "его",
    "только",
    "или",
    "бы",
    "уже",
    "было",
    "если",
    "при",
    "когда",
    "был",
    "мы",
    "нет",
    "ни",
    "ли",
    "под",
    "то",
    "они",
    "есть",
    "где",
    "там",
    "даже",
    "через",
]
_ONSETS = [
    "б",
    "в",
    "г",
    "д",
    "ж",
    "з",
    "к",
    "л",
    "м",
    "н",
    "п",
    "р",
    "с",
    "т",
    "ф",
    "х",
    "ц",
    "ч",
    "ш",
    "пр",
    "ст",
    "тр",
    "кр",
    "гр",
    "бл",
    "сп",
    "зв",
    "др",
]
_VOWELS = ["а", "е", "и", "о", "у", "ы", "я", "ю"]
_ENDINGS = ["", "ый", "ая", "ое", "ов", "ами", "ение", "ость", "ать", "ить", "ка", "ник", "ство", "ой", "ем"]


def vocabulary(rng: random.Random, size: int = 20000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.choice((1, 2, 2, 3, 3, 4))
        stem = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables))
        words.add(stem + rng.choice(_ENDINGS))
    return sorted(words)


class Corpus:
    """Zipf-distributed words; each record belongs to one of 200 topics with its own 40 words."""

    def __init__(self, seed: int = SEED):
        self.rng = random.Random(seed)
        self.words = vocabulary(self.rng)
        weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words))]
        self.cum_weights = list(itertools.accumulate(weights))
        self.topics = [self.rng.sample(self.words[300:], 40) for _ in range(200)]

    def text(self, topic: int, n_words: int) -> str:
        # ~35 % real Russian stop words (both to_tsvector and the embedder drop them), ~20 % a
        # Zipf-distributed general vocabulary, ~45 % the topic's own words (so that, as with a real
        # embedding model, documents on one topic sit close together).
        stop = self.rng.choices(STOP, k=int(n_words * 0.35))
        common = self.rng.choices(self.words, cum_weights=self.cum_weights, k=int(n_words * 0.2))
        specific = self.rng.choices(self.topics[topic], k=n_words - len(stop) - len(common))
        tokens = stop + common + specific
        self.rng.shuffle(tokens)
        return " ".join(tokens).capitalize() + "."

    def acl(self) -> list[str]:
        roll = self.rng.random()
        if roll < 0.01:
            return ["group:narrow"]
        if roll < 0.06:
            return ["public"]
        if roll < 0.61:
            return ["everyone"]
        if roll < 0.91:
            return [self.rng.choice(GROUPS)]
        return [self.rng.choice(USERS)]


def _vector_text(vector) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in vector) + "]"


BUILD_LOCK = 0x6B5F6265  # pg_advisory_lock key: one builder at a time (bench/chat shares the dataset)
HNSW_INDEX_SQL = (
    "CREATE INDEX knowledge_chunk_emb_hnsw32 ON knowledge_chunks "
    "USING hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128)"
)
PUBLIC_INDEX_SQL = (
    "CREATE INDEX knowledge_chunk_embedding_public_hnsw ON knowledge_chunks "
    "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
    "WHERE acl && '{public}'::text[]"
)


def dataset_key(chunks: int = CHUNKS) -> str:
    return f"{DATASET_VERSION}:{chunks}"


def dataset_fresh(cursor, chunks: int = CHUNKS) -> bool:
    return stored_dataset(cursor) == dataset_key(chunks)


def stored_dataset(cursor) -> str | None:
    cursor.execute("SELECT to_regclass('bench_meta') IS NOT NULL")
    if not cursor.fetchone()[0]:
        return None
    cursor.execute("SELECT value FROM bench_meta WHERE key = 'dataset'")
    row = cursor.fetchone()
    return row[0] if row else None


def build(cursor, embedder) -> None:
    """Build the dataset unless another process already did (concurrent callers wait and skip)."""
    cursor.execute("SELECT pg_advisory_lock(%s)", [BUILD_LOCK])
    try:
        if not dataset_fresh(cursor):
            _build(cursor, embedder, CHUNKS)
    finally:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [BUILD_LOCK])


def _build(cursor, embedder, chunks: int, *, have_records: int = 0) -> dict:
    """Records ``have_records + 1 …`` of the ``chunks``-chunk dataset (the corpus is generated from
    the start: record n is the same in every size), then both HNSW indexes, timed."""
    corpus = Corpus()
    n_records = chunks // CHUNKS_PER_RECORD
    if not have_records:
        cursor.execute("TRUNCATE knowledge_records RESTART IDENTITY CASCADE")
    cursor.execute("DROP INDEX IF EXISTS knowledge_chunk_emb_hnsw32")
    cursor.execute("DROP INDEX IF EXISTS knowledge_chunk_embedding_public_hnsw")
    started = time.monotonic()
    records = io.StringIO()
    chunk_rows: list[tuple[int, int, str, str]] = []
    for rid in range(1, n_records + 1):
        topic = corpus.rng.randrange(len(corpus.topics))
        acl = corpus.acl()
        author = corpus.rng.choice(USERS)
        texts = [corpus.text(topic, corpus.rng.randint(60, 110)) for _ in range(CHUNKS_PER_RECORD)]
        if rid <= have_records:
            continue
        records.write(
            f"{rid}\tbench\tdoc-{rid}\tДокумент {rid}\thttps://wiki.example/{rid}\t{author}\t"
            "{" + ",".join(acl) + "}\t1\tbench\t\\N\t\tf\n"
        )
        chunk_rows.extend((rid, ordinal, f"Документ {rid}", text) for ordinal, text in enumerate(texts))
    records.seek(0)
    with cursor.copy(
        "COPY knowledge_records (id, source_system, external_id, title, url, author_principal_id, "
        "acl, trust_score, origin, embedding_model, content_hash, user_writable) FROM STDIN"
    ) as copy:
        copy.write(records.read())
    print(
        f"  records: {n_records - have_records} in {time.monotonic() - started:.1f}s; "
        f"embedding {len(chunk_rows)} chunks …",
        flush=True,
    )
    batch = 2000
    for start in range(0, len(chunk_rows), batch):
        rows = chunk_rows[start : start + batch]
        vectors = embedder.embed([f"{heading} › {text}" for _, _, heading, text in rows])
        buf = io.StringIO()
        for (rid, ordinal, heading, text), vector in zip(rows, vectors, strict=True):
            buf.write(f"{rid}\t{ordinal}\t{heading}\t{text}\t{_vector_text(vector)}\n")
        buf.seek(0)
        with cursor.copy("COPY knowledge_chunks (record_id, ordinal, heading, text, embedding) FROM STDIN") as copy:
            copy.write(buf.read())
        if (start // batch) % 10 == 0:
            print(f"    {start + len(rows)} chunks, {time.monotonic() - started:.0f}s", flush=True)
    cursor.execute("SELECT setval(pg_get_serial_sequence('knowledge_records', 'id'), %s)", [n_records])
    print("  building the HNSW indexes …", flush=True)
    # the graph must fit in it, or pgvector's build slows down many times (≈ 2 GB at 1M chunks)
    cursor.execute(f"SET maintenance_work_mem = '{'1GB' if chunks <= 400_000 else '3GB'}'")
    # the same indexes as migrations 0005 (main) and 0004 (public)
    index_started = time.monotonic()
    cursor.execute(HNSW_INDEX_SQL)
    main_seconds = time.monotonic() - index_started
    index_started = time.monotonic()
    cursor.execute(PUBLIC_INDEX_SQL)
    public_seconds = time.monotonic() - index_started
    cursor.execute("ANALYZE knowledge_records")
    cursor.execute("ANALYZE knowledge_chunks")
    cursor.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value text)")
    timings = {"hnsw_build_s": round(main_seconds, 1), "public_hnsw_build_s": round(public_seconds, 1)}
    for key, value in [("dataset", dataset_key(chunks)), ("timings", json.dumps(timings))]:
        cursor.execute(
            "INSERT INTO bench_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [key, value],
        )
    print(
        f"  built in {time.monotonic() - started:.0f}s (HNSW {main_seconds:.0f}s, public HNSW {public_seconds:.0f}s)",
        flush=True,
    )
    return timings


def queries(n: int) -> list[str]:
    """Short queries made of informative words of a random document (as a person would type)."""
    corpus = Corpus()
    rng = random.Random(SEED + 1)
    out = []
    for _ in range(n):
        topic_words = corpus.topics[rng.randrange(len(corpus.topics))]
        mid = corpus.words[100:3000]
        picked = rng.sample(topic_words, rng.choice((2, 3))) + [rng.choice(mid)]
        rng.shuffle(picked)
        out.append(" ".join(picked))
    return out


# --------------------------------------------------------------------------- the three sides


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


class Sides:
    """Ours, the bare peer and the complete peer, each callable on one query; their ef settings."""

    def __init__(self, connection, embedder):
        from knowledge import facade

        self.connection = connection
        self.embedder = embedder
        self.facade = facade
        self.peer_ef: int | None = None
        self.iterative_on = False

    def set_ours_ef(self, ef: int) -> None:
        from knowledge.search import vector

        vector.HNSW_EF_SEARCH = ef

    def set_peer_ef(self, ef: int) -> None:
        # the peer's user sets it once for the session; ours sets its own per transaction
        if ef != self.peer_ef:
            with self.connection.cursor() as cursor:
                cursor.execute(f"SET hnsw.ef_search = {int(ef)}")
            self.peer_ef = ef

    def ours(self, q: str, principals) -> int:  # each side returns how many things it handed back
        result = self.facade.search(q, self.facade.Identity(principals), K)
        return len(result.candidates)

    def bare(self, q: str, principals) -> int:
        from knowledge.search.vector import vector_literal

        vector = self.embedder.embed([q])[0]
        with self.connection.cursor() as cursor:
            cursor.execute(
                PEER_SQL,
                {
                    "embedding": vector_literal(vector),
                    "query": q,
                    "principals": sorted(principals),
                    "k": 60,
                    "limit": K,
                },
            )
            return len(cursor.fetchall())

    def complete(self, q: str, principals) -> int:
        from knowledge.search.vector import vector_literal

        vector = vector_literal(self.embedder.embed([q])[0])
        params = {"embedding": vector, "query": q, "principals": sorted(principals), "k": 60, "limit": K}
        with self.connection.cursor() as cursor:
            cursor.execute(PEER_SQL, params)
            ranked = cursor.fetchall()
            cursor.execute(PEER_DETAILS_SQL, {"ids": [row[0] for row in ranked]})
            details = {row[0]: row for row in cursor.fetchall()}
            cursor.execute(PEER_WITHHELD_SQL, params)
            withheld = cursor.fetchall()
        # what ours hands back: candidates with record, title, url, text, score and rank; coordinates
        candidates = [
            {
                "chunk_id": chunk_id,
                "record_id": details[chunk_id][1],
                "title": details[chunk_id][2],
                "url": details[chunk_id][3] or "",
                "source_system": details[chunk_id][4],
                "text": details[chunk_id][5],
                "score": float(score),
                "rank": rank,
            }
            for rank, (chunk_id, score) in enumerate(ranked, start=1)
            if chunk_id in details
        ]
        coordinates = [{"source_system": source, "author_principal_id": author} for source, author in withheld]
        return len(candidates) + len(coordinates)

    # ---- recall: each side's vector list as it builds it, against exact search

    def ours_vector(self, q: str, principals) -> list[int]:
        """Our vector list exactly as ``search`` builds it (HNSW candidates + lexical ids re-scored)."""
        from django.db import transaction

        from knowledge.search.hybrid import candidate_depth
        from knowledge.search.lexical import lexical_lists
        from knowledge.search.vector import vector_list

        depth = candidate_depth(K)
        vector = self.embedder.embed([q])[0]
        with transaction.atomic(), self.connection.cursor() as cursor:
            lexical = lexical_lists(cursor, q, sorted(principals), depth, K)
            return vector_list(
                cursor, vector, sorted(principals), depth, -1.0, extra=lexical.visible if lexical else ()
            )

    def peer_vector(self, q: str, principals) -> list[int]:
        from knowledge.search.vector import vector_literal

        vector = self.embedder.embed([q])[0]
        with self.connection.cursor() as cursor:
            cursor.execute(PEER_VECTOR_SQL, {"embedding": vector_literal(vector), "principals": sorted(principals)})
            return [row[0] for row in cursor.fetchall()]

    def exact(self, q: str, principals, n: int = RECALL_AT, everything: bool = False) -> list[int]:
        from django.db import transaction

        from knowledge.search.vector import vector_literal

        vector = self.embedder.embed([q])[0]
        with transaction.atomic(), self.connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_indexscan = off")  # no HNSW: a sequential or bitmap scan, exact
            cursor.execute(
                EXACT_ALL_SQL if everything else EXACT_SQL,
                {"embedding": vector_literal(vector), "principals": sorted(principals), "n": n},
            )
            return [row[0] for row in cursor.fetchall()]

    # ---- the growth table's vector peers: one statement each (the session's ef, set_peer_ef)

    def ready(self, side: str) -> None:
        """Untimed, before ``side`` runs: the iterative peer's session setting on, else off."""
        iterative = side == "iterative"
        if iterative != self.iterative_on:
            with self.connection.cursor() as cursor:
                cursor.execute(f"SET hnsw.iterative_scan = {'relaxed_order' if iterative else 'off'}")
            self.iterative_on = iterative

    def plain(self, q: str, principals, k: int = K) -> list[int]:
        from knowledge.search.vector import vector_literal

        self.ready("plain")
        vector = self.embedder.embed([q])[0]
        with self.connection.cursor() as cursor:
            cursor.execute(PLAIN_SQL, {"embedding": vector_literal(vector), "principals": sorted(principals), "k": k})
            return [row[0] for row in cursor.fetchall()]

    def iterative(self, q: str, principals, k: int = K) -> list[int]:
        from knowledge.search.vector import vector_literal

        self.ready("iterative")
        vector = self.embedder.embed([q])[0]
        with self.connection.cursor() as cursor:
            cursor.execute(PLAIN_SQL, {"embedding": vector_literal(vector), "principals": sorted(principals), "k": k})
            rows = [row[0] for row in cursor.fetchall()]
        self.ready("plain")
        return rows


def recall(found: list[int], exact: list[int]) -> float:
    return len(set(found[:RECALL_AT]) & set(exact)) / max(1, len(exact))


def recall_at(found: list[int], exact: list[int], k: int = K) -> float:
    """recall@k: the share of the exact k nearest among the first k found."""
    return len(set(found[:k]) & set(exact[:k])) / max(1, len(exact[:k]))


SIDE_NAMES = ("ours", "bare", "complete")


def interleaved(sides: Sides, qs: list[str], principals, names: tuple[str, ...] = SIDE_NAMES) -> dict[str, list[float]]:
    """Milliseconds per query of each side, query by query, the order rotating."""
    times: dict[str, list[float]] = {name: [] for name in names}
    for i, q in enumerate(qs):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            sides.ready(name)  # untimed: the session setting the side needs
            started = time.perf_counter()
            getattr(sides, name)(q, principals)
            times[name].append((time.perf_counter() - started) * 1000)
    return times


def sweep(sides: Sides, qs: list[str], principals, exact: list[list[int]]) -> list[dict]:
    rows = []
    for ef in EF_SWEEP:
        sides.set_ours_ef(ef)
        sides.set_peer_ef(ef)
        ours_recall = sum(recall(sides.ours_vector(q, principals), e) for q, e in zip(qs, exact, strict=True))
        peer_recall = sum(recall(sides.peer_vector(q, principals), e) for q, e in zip(qs, exact, strict=True))
        times = interleaved(sides, qs, principals)
        rows.append(
            {
                "ef": ef,
                "ours_recall": ours_recall / len(qs),
                "peer_recall": peer_recall / len(qs),
                **{f"{name}_p95": percentile(times[name], 0.95) for name in SIDE_NAMES},
            }
        )
    return rows


def lowest_ef(rows: list[dict], side: str) -> tuple[int, float, bool]:
    """The lowest ef of the sweep reaching the target recall (else the best one) → (ef, recall, reached)."""
    for row in rows:
        if row[f"{side}_recall"] >= TARGET_RECALL:
            return row["ef"], row[f"{side}_recall"], True
    best = max(rows, key=lambda row: (row[f"{side}_recall"], -row["ef"]))
    return best["ef"], best[f"{side}_recall"], False


# --------------------------------------------------------------------------- the run


def _setup_database(embedder):
    import logging

    import django

    django.setup()
    from django.db import connection

    from achilles.models import AllowedModel

    # the hint policy logs every search over its hourly limit: the bench's identities are always over
    logging.getLogger("knowledge.services").setLevel(logging.ERROR)
    settings_dict = connection.settings_dict
    settings_dict.setdefault("TEST", {})["NAME"] = DB_NAME
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=True, serialize=False)
    AllowedModel.objects.update_or_create(
        name="bench-hash-384",
        defaults={"provider": "hash", "kind": "embedding", "is_default": True, "options": {"dim": 384}},
    )
    with connection.cursor() as cursor:
        if not dataset_fresh(cursor):
            print(f"building the dataset ({CHUNKS} chunks; kept in database {DB_NAME} for next runs)")
            build(cursor, embedder)
        else:
            print(f"dataset: {CHUNKS} chunks (cached in database {DB_NAME})")
    return connection, old_name


def _visible_shares(connection) -> tuple[int, dict[str, float]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_chunks")
        total = cursor.fetchone()[0]
        shares = {}
        for name, principals in IDENTITIES.items():
            cursor.execute("SELECT count(*) FROM knowledge_chunks WHERE acl && %s::text[]", [sorted(principals)])
            shares[name] = cursor.fetchone()[0] / max(total, 1)
    return total, shares


def _warm_up(sides: Sides, qs: list[str]) -> None:
    for q in qs[:20]:
        for principals in IDENTITIES.values():
            sides.ours(q, principals)
            sides.complete(q, principals)


def main() -> None:
    if os.environ.get("BENCH_KS_SCALE_CHILD"):
        return _scale_child()
    from achilles.llm.builtin import HashEmbeddingProvider

    embedder = HashEmbeddingProvider(dim=384)
    connection, old_name = _setup_database(embedder)
    try:
        result = {"bench": "knowledge", "identities": {}} if SCALE_ONLY else _equal_recall(connection, embedder)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=True)
        connection.close_pool()  # keepdb leaves the pool bound to the bench database
    if SCALE:
        result["scale"] = _scale_table()
    print("RESULT " + json.dumps(result, ensure_ascii=False), flush=True)


def _equal_recall(connection, embedder) -> dict:
    from django.conf import settings

    from knowledge.search import vector as ks_vector

    sides = Sides(connection, embedder)
    total, visible = _visible_shares(connection)
    qs = queries(QUERIES)
    sweep_qs = qs[:SWEEP_QUERIES]
    default_ef = ks_vector.HNSW_EF_SEARCH
    print(
        f"\n{total} chunks, k={K}; recall@{RECALL_AT} of each side's vector list against exact search "
        f"({SWEEP_QUERIES} queries); sweep p95 over the same queries, the three sides interleaved; "
        f"ours' default hnsw.ef_search = {default_ef}; ours' vector statements beside the lexical ones: "
        f"{'on' if settings.KS_SEARCH_PARALLEL else 'off (KS_SEARCH_PARALLEL)'}"
    )
    _warm_up(sides, qs)
    chosen: dict[str, dict] = {}
    try:
        for name, principals in IDENTITIES.items():
            exact = [sides.exact(q, principals) for q in sweep_qs]
            rows = sweep(sides, sweep_qs, principals, exact)
            print(f"\n{name} ({visible[name]:.1%} of the chunks visible): sweep")
            print(
                f"{'ef_search':>9} {'ours recall':>11} {'peer recall':>11} {'ours p95':>9} {'bare p95':>9} "
                f"{'complete p95':>12}"
            )
            for row in rows:
                print(
                    f"{row['ef']:>9} {row['ours_recall']:>11.3f} {row['peer_recall']:>11.3f} "
                    f"{row['ours_p95']:>7.1f}ms {row['bare_p95']:>7.1f}ms {row['complete_p95']:>10.1f}ms",
                    flush=True,
                )
            ours_ef, ours_recall, ours_ok = lowest_ef(rows, "ours")
            peer_ef, peer_recall, peer_ok = lowest_ef(rows, "peer")
            chosen[name] = {
                "ours_ef": ours_ef,
                "peer_ef": peer_ef,
                "ours_recall": ours_recall,
                "peer_recall": peer_recall,
                "ours_ok": ours_ok,
                "peer_ok": peer_ok,
            }

        print(
            f"\nat equal recall (the lowest ef reaching recall@{RECALL_AT} ≥ {TARGET_RECALL}), {len(qs)} queries "
            "per identity, the three sides interleaved query by query"
        )
        print(
            f"{'identity':<10} {'ef ours/peer':>12} {'recall ours/peer':>16} {'ours p50':>9} {'ours p95':>9} "
            f"{'bare p50':>9} {'bare p95':>9} {'compl p50':>9} {'compl p95':>9} {'vs compl':>8} {'vs bare':>8}"
        )
        result: dict = {"bench": "knowledge", "chunks": total, "identities": {}}
        for name, principals in IDENTITIES.items():
            c = chosen[name]
            sides.set_ours_ef(c["ours_ef"])
            sides.set_peer_ef(c["peer_ef"])
            times = interleaved(sides, qs, principals)
            p50 = {side: percentile(times[side], 0.5) for side in SIDE_NAMES}
            p95 = {side: percentile(times[side], 0.95) for side in SIDE_NAMES}
            # «*»: no ef of the sweep reached the target recall; the best one is used
            recalls = (
                f"{c['ours_recall']:.3f}{'' if c['ours_ok'] else '*'}/"
                f"{c['peer_recall']:.3f}{'' if c['peer_ok'] else '*'}"
            )
            print(
                f"{name:<10} {c['ours_ef']:>5}/{c['peer_ef']:<6} {recalls:>16} "
                f"{p50['ours']:>7.1f}ms {p95['ours']:>7.1f}ms {p50['bare']:>7.1f}ms {p95['bare']:>7.1f}ms "
                f"{p50['complete']:>7.1f}ms {p95['complete']:>7.1f}ms {p95['ours'] / p95['complete']:>7.2f}x "
                f"{p95['ours'] / p95['bare']:>7.2f}x",
                flush=True,
            )
            result["identities"][name] = {
                "ours_p95_ms": round(p95["ours"], 2),
                "peer_p95_ms": round(p95["bare"], 2),
                "complete_peer_p95_ms": round(p95["complete"], 2),
                "ours_ef": c["ours_ef"],
                "peer_ef": c["peer_ef"],
                "ours_recall": round(c["ours_recall"], 3),
                "peer_recall": round(c["peer_recall"], 3),
            }
    finally:
        ks_vector.HNSW_EF_SEARCH = default_ef
    _print_targets(result, total)
    return result


def _print_targets(result: dict, total: int) -> None:
    print(
        "targets: ours p95 ≤ 1.0× the complete peer and ≤ 1.5× the bare peer (each at recall@10 ≥ 0.95); "
        "broad p95 ≤ 30 ms at 100k chunks"
    )
    for name, row in result["identities"].items():
        vs_complete = row["ours_p95_ms"] / row["complete_peer_p95_ms"]
        vs_bare = row["ours_p95_ms"] / row["peer_p95_ms"]
        print(
            f"  {name:<10} vs complete {vs_complete:.2f}× {'met' if vs_complete <= 1.0 else 'NOT met'}; "
            f"vs bare {vs_bare:.2f}× {'met' if vs_bare <= 1.5 else 'NOT met'}"
        )
    broad = result["identities"]["broad"]["ours_p95_ms"]
    at = "" if total == 100000 else f" (measured at {total} chunks, the target is for 100k)"
    print(f"  broad p95 {broad:.1f} ms ≤ 30 ms: {'met' if broad <= 30 else 'NOT met'}{at}")


# --------------------------------------------------------------------------- how it grows


def _scale_table() -> list[dict]:
    """The growth table: at each of SCALE_SIZES, in a scratch database (a copy of the largest
    dataset already built below the size, extended; or kept from an earlier run), for each of
    SCALE_IDENTITIES: recall@K of ours and both vector peers against exact search under the same
    ACL, p50/p95 of the four sides interleaved, which plan ours took; HNSW build time and size."""
    import django

    django.setup()
    from django.db import connection

    from knowledge.search import vector as ks_vector

    ef = SCALE_EF or ks_vector.HNSW_EF_SEARCH
    print(
        f"\nhow it grows: each size in a scratch database; hnsw.ef_search {ef} for every side (ours' "
        f"production setting); {SCALE_QUERIES} queries per identity, recall@{K} over {SCALE_RECALL_QUERIES} "
        "of them against exact search under the same ACL",
        flush=True,
    )
    rows = []
    for size in SCALE_SIZES:
        database = f"bench_ks_scale_{size}"
        kept = SCALE_KEEP and _kept_dataset(database, size)
        with connection.cursor() as cursor:
            if not kept:
                cursor.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            # the largest dataset already built below this size: its records are this one's first
            sources = [(CHUNKS, DB_NAME)] + [(s, f"bench_ks_scale_{s}") for s in SCALE_SIZES if CHUNKS < s < size]
            template_db = None
            for source_size, source_db in sources:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [source_db])
                exists = cursor.fetchone() is not None and size >= source_size and not kept
                if exists and (source_db == DB_NAME or _kept_dataset(source_db, source_size)):
                    template_db = source_db
            template = template_db is not None
            if kept:
                print(f"  {size}: the database kept from an earlier run ({database})", flush=True)
            elif template:
                # a template must have no other session (a pooled connection of this process, autovacuum)
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    [template_db],
                )
                time.sleep(1)
                cursor.execute(f"CREATE DATABASE {database} TEMPLATE {template_db}")
            else:
                cursor.execute(f"CREATE DATABASE {database}")
        try:
            env = {
                **os.environ,
                "ACHILLES_DB_NAME": database,
                "DJANGO_SETTINGS_MODULE": "achilles.settings",
                "BENCH_KS_SCALE_CHILD": json.dumps({"size": size, "ef": ef, "template": template, "kept": kept}),
            }
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from achilles.bootstrap import bootstrap; bootstrap(); import bench.knowledge as b; b.main()",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None
            lines = []
            for line in child.stdout:  # streamed: a build at 1M takes half an hour
                if line.startswith("SCALE "):
                    lines.append(line)
                else:
                    print("  " + line.rstrip("\n"), flush=True)
            if child.wait() or not lines:
                if not (SCALE_BUILD_ONLY and child.returncode == 0):
                    print(f"  {size}: the child failed ({child.returncode})")
                continue
            rows.append(json.loads(lines[-1][6:]))
        finally:
            if not SCALE_KEEP:
                with connection.cursor() as cursor:
                    cursor.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    _print_scale(rows)
    return rows


def _plan_cell(row: dict) -> str:
    return row["plan"] if row["plan"] == "exact" else f"{row['plan']} {row.get('ef', '')}"


def _print_scale(rows: list[dict]) -> None:
    print(
        f"\n{'chunks':>8} {'HNSW build':>10} {'index MB':>9} {'load':>10}  "
        f"{'identity':<9} {'visible':>8} {'plan, ef':<9} "
        f"{'ours p50/p95':>15} {'plain p50/p95':>14} {'iter p50/p95':>14} {'compl p50/p95':>15} "
        f"{'recall@' + str(K) + ' ours/plain/iter':>27} {'÷ compl':>7}"
    )
    for row in rows:
        first = True
        for name, r in row["identities"].items():
            lead = (
                f"{row['chunks']:>8} {row['hnsw_build_s']:>9.0f}s {row['index_mb']:>9.0f} "
                f"{row['load'][0]:>4.1f}→{row['load'][1]:<4.1f}"
                if first
                else " " * 40
            )
            first = False
            print(
                f"{lead}  {name:<9} {r['visible']:>7.2%} {_plan_cell(r):<9} "
                f"{r['ours_p50_ms']:>6.1f}/{r['ours_p95_ms']:<6.1f}ms "
                f"{r['plain_p50_ms']:>5.1f}/{r['plain_p95_ms']:<6.1f}ms "
                f"{r['iterative_p50_ms']:>5.1f}/{r['iterative_p95_ms']:<6.1f}ms "
                f"{r['complete_p50_ms']:>6.1f}/{r['complete_p95_ms']:<6.1f}ms "
                f"{r['ours_recall']:>13.3f}/{r['plain_recall']:.3f}/{r['iterative_recall']:.3f} "
                f"{r['ours_p95_ms'] / r['complete_p95_ms']:>6.2f}x",
                flush=True,
            )
    print(
        f"targets: recall@{K} ≥ {TARGET_RECALL} for every identity at every size; p95 ≤ 50 ms at 1M; "
        "p95 ≤ 1.0× the complete peer at 20k and 100k (the equal-recall table above)"
    )
    for row in rows:
        for name, r in row["identities"].items():
            misses = []
            if r["ours_recall"] < TARGET_RECALL:
                misses.append(f"recall {r['ours_recall']:.3f}")
            if row["chunks"] >= 1_000_000 and r["ours_p95_ms"] > 50:
                misses.append(f"p95 {r['ours_p95_ms']:.1f} ms > 50")
            if misses:
                print(f"  {row['chunks']} {name}: NOT met ({', '.join(misses)})")
    by_size = {row["chunks"]: row for row in rows}
    small = [n for n in by_size if 90_000 <= n <= 110_000]
    large = [n for n in by_size if n >= 900_000]
    if small and large:
        a, b = by_size[small[0]], by_size[large[-1]]
        growth = ", ".join(
            f"{name} {b['identities'][name]['ours_p95_ms'] / a['identities'][name]['ours_p95_ms']:.1f}×"
            for name in a["identities"]
        )
        print(
            f"  ours p95 from {a['chunks']} to {b['chunks']} chunks ({b['chunks'] / a['chunks']:.0f}× the store): {growth}"
        )


def _kept_dataset(database: str, size: int) -> bool:
    """Whether ``database`` exists and holds the ``size``-chunk dataset, built to the end."""
    import psycopg
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database])
        if cursor.fetchone() is None:
            return False
    params = {**connection.get_connection_params(), "dbname": database}
    params.pop("database", None)
    params.pop("pool", None)
    with psycopg.connect(**params) as kept, kept.cursor() as cursor:
        return dataset_fresh(cursor, size)


def _scale_child() -> None:
    import logging

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from achilles.llm.builtin import HashEmbeddingProvider
    from achilles.models import AllowedModel
    from knowledge.search import vector as ks_vector
    from knowledge.search.hybrid import candidate_depth

    logging.getLogger("knowledge.services").setLevel(logging.ERROR)  # see _setup_database
    spec = json.loads(os.environ["BENCH_KS_SCALE_CHILD"])
    size = spec["size"]
    embedder = HashEmbeddingProvider(dim=384)
    if not spec["template"]:
        call_command("migrate", verbosity=0)
    AllowedModel.objects.update_or_create(
        name="bench-hash-384",
        defaults={"provider": "hash", "kind": "embedding", "is_default": True, "options": {"dim": 384}},
    )
    print(f"{size} chunks:", flush=True)
    with connection.cursor() as cursor:
        have = 0
        if spec.get("kept"):
            cursor.execute("SELECT value FROM bench_meta WHERE key = 'timings'")
            timings = json.loads(cursor.fetchone()[0])
        else:
            if spec["template"]:
                cursor.execute("SELECT count(*) FROM knowledge_records")
                have = cursor.fetchone()[0]
            timings = _build(cursor, embedder, size, have_records=have)
        cursor.execute(
            "SELECT pg_relation_size('knowledge_chunk_emb_hnsw32'), "
            "pg_relation_size('knowledge_chunk_embedding_public_hnsw'), count(*) FROM knowledge_chunks"
        )
        index_bytes, public_bytes, total = cursor.fetchone()
    if SCALE_BUILD_ONLY:
        return
    load_before = os.getloadavg()[0]
    sides = Sides(connection, embedder)
    sides.set_ours_ef(spec["ef"])
    sides.set_peer_ef(spec["ef"])
    qs = queries(SCALE_QUERIES)
    recall_qs = qs[:SCALE_RECALL_QUERIES]
    for q in qs[:10]:  # warm: the index's pages, the prepared statements
        for principals in SCALE_IDENTITIES.values():
            sides.ours(q, principals)
    out = {
        "chunks": total,
        "index_mb": index_bytes / 2**20,
        "public_index_mb": public_bytes / 2**20,
        **timings,
        "identities": {},
    }
    depth = candidate_depth(K)
    for name, principals in SCALE_IDENTITIES.items():
        ordered = sorted(principals)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM knowledge_chunks WHERE acl && %s::text[]", [ordered])
            visible = cursor.fetchone()[0] / max(total, 1)
            nearest = ks_vector.nearest_plan(cursor, ordered, depth)
            plan = "exact" if nearest.exact else _planned_scan(cursor, ordered, depth)
        started = time.monotonic()
        # an identity that sees every chunk: exact search without the ACL is the same list, and
        # spares a sequential scan testing hundreds of principals against every row
        exact = [sides.exact(q, principals, n=K, everything=visible >= 1.0) for q in recall_qs]
        exact_s = time.monotonic() - started
        ours_recall = _mean(
            recall_at(sides.ours_vector(q, principals), e) for q, e in zip(recall_qs, exact, strict=True)
        )
        plain_recall = _mean(recall_at(sides.plain(q, principals, K), e) for q, e in zip(recall_qs, exact, strict=True))
        iterative_recall = _mean(
            recall_at(sides.iterative(q, principals, K), e) for q, e in zip(recall_qs, exact, strict=True)
        )
        times = interleaved(sides, qs, principals, SCALE_SIDES)
        row = {"visible": visible, "plan": plan, "ef": nearest.ef, "exact_search_s": exact_s / len(recall_qs)}
        for side in SCALE_SIDES:
            row[f"{side}_p50_ms"] = percentile(times[side], 0.5)
            row[f"{side}_p95_ms"] = percentile(times[side], 0.95)
        row.update(ours_recall=ours_recall, plain_recall=plain_recall, iterative_recall=iterative_recall)
        out["identities"][name] = row
        if plan == "graph" and SCALE_EF_SWEEP:
            row["ef_sweep"] = _ours_ef_sweep(sides, recall_qs, principals, exact, spec["ef"])
        print(
            f"  {name} ({visible:.2%} visible, plan {plan}, ef {nearest.ef}): ours p95 {row['ours_p95_ms']:.1f} ms, "
            f"recall@{K} ours {ours_recall:.3f} plain {plain_recall:.3f} iterative {iterative_recall:.3f}",
            flush=True,
        )
    out["load"] = [load_before, os.getloadavg()[0]]
    print("SCALE " + json.dumps(out), flush=True)


def _ours_ef_sweep(sides: Sides, qs: list[str], principals, exact: list[list[int]], ef: int) -> list[dict]:
    """Ours at each ef of SCALE_EF_SWEEP, as given (``walk_ef``'s widening off): recall@K of its
    vector list and p50/p95 of the search."""
    from knowledge.search import vector as ks_vector

    rows = []
    widest = ks_vector.EF_MAX
    ks_vector.EF_MAX = 0  # walk_ef never goes below the ef it is given
    ks_vector._exact_plans.clear()
    for sweep_ef in SCALE_EF_SWEEP:
        sides.set_ours_ef(sweep_ef)
        found = [sides.ours_vector(q, principals) for q in qs]
        times = interleaved(sides, qs, principals, ("ours",))["ours"]
        rows.append(
            {
                "ef": sweep_ef,
                "recall": _mean(recall_at(f, e) for f, e in zip(found, exact, strict=True)),
                "p50_ms": percentile(times, 0.5),
                "p95_ms": percentile(times, 0.95),
            }
        )
        print(
            f"    ours at ef {sweep_ef}: recall@{K} {rows[-1]['recall']:.3f}, "
            f"p50/p95 {rows[-1]['p50_ms']:.1f}/{rows[-1]['p95_ms']:.1f} ms",
            flush=True,
        )
    ks_vector.EF_MAX = widest
    ks_vector._exact_plans.clear()
    sides.set_ours_ef(ef)
    return rows


def _mean(values) -> float:
    values = list(values)
    return sum(values) / max(1, len(values))


def _planned_scan(cursor, principals: list[str], depth: int) -> str:
    """What the planner does with ours' nearest statement (which it is left to): «graph» (the HNSW
    index, filtered by the ACL with an iterative scan, or the partial index the ACL implies) or
    «exact» (the ACL's bitmap or a sequential scan, then a sort)."""
    from knowledge.search import vector as ks_vector

    params = {
        "ef_search": str(ks_vector.ef_search(depth)),
        "vec": ks_vector.vector_literal([1.0]),
        "principals": principals,
        "n": depth,
    }
    cursor.execute("BEGIN")
    try:
        cursor.execute(ks_vector.HNSW_SETTINGS_SQL, params)
        cursor.execute(ks_vector.NEAREST_PLAN_SQL, params)
        plan = cursor.fetchone()[0]
    finally:
        cursor.execute("ROLLBACK")
    text = json.dumps(plan)
    return "graph" if "hnsw" in text else "exact"
