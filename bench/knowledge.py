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
``BENCH_KS_SCALE=1`` adds p95, HNSW build time and index size at 10k, 100k and 300k chunks
(scratch databases, created and dropped here; kept for the next run with ``BENCH_KS_SCALE_KEEP=1``).
The last line is ``RESULT {json}``.

    make bench            # every benchmark
    python -m bench knowledge
    BENCH_KS_CHUNKS=20000 BENCH_KS_QUERIES=100 python -m bench knowledge   # quicker, smaller
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
SEED = 20261129
GROUPS = [f"group:g{i}" for i in range(20)]
USERS = [f"user:{1000 + i}" for i in range(500)]
DB_NAME = "bench_knowledge"
ROOT = Path(__file__).resolve().parent.parent

IDENTITIES = {
    # a signed-in employee in two groups: sees `everyone`, `public`, their groups and own records
    "broad": frozenset({"everyone", "public", "group:g1", "group:g2", "user:1001"}),
    # a contractor-like principal set that sees 1 % of the records
    "narrow": frozenset({"group:narrow"}),
    "anonymous": frozenset({"public"}),
}

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
    cursor.execute("SET maintenance_work_mem = '1GB'")
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

    def exact(self, q: str, principals) -> list[int]:
        from django.db import transaction

        from knowledge.search.vector import vector_literal

        vector = self.embedder.embed([q])[0]
        with transaction.atomic(), self.connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_indexscan = off")  # no HNSW: a sequential or bitmap scan, exact
            cursor.execute(
                EXACT_SQL, {"embedding": vector_literal(vector), "principals": sorted(principals), "n": RECALL_AT}
            )
            return [row[0] for row in cursor.fetchall()]


def recall(found: list[int], exact: list[int]) -> float:
    return len(set(found[:RECALL_AT]) & set(exact)) / max(1, len(exact))


SIDE_NAMES = ("ours", "bare", "complete")


def interleaved(sides: Sides, qs: list[str], principals) -> dict[str, list[float]]:
    """Milliseconds per query of the three sides, query by query, the order rotating."""
    times: dict[str, list[float]] = {name: [] for name in SIDE_NAMES}
    for i, q in enumerate(qs):
        for name in SIDE_NAMES[i % 3 :] + SIDE_NAMES[: i % 3]:
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
        result = _equal_recall(connection, embedder)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=True)
        connection.close_pool()  # keepdb leaves the pool bound to the bench database
    if SCALE:
        _scale_table({name: (row["ours_ef"], row["peer_ef"]) for name, row in result["identities"].items()})
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


def _scale_table(efs: dict[str, tuple[int, int]]) -> None:
    """p95 of the three sides, recall, HNSW build time and index size at each of SCALE_SIZES, each in
    a scratch database (a copy of the cached dataset when it is a prefix of the size, else built)."""
    import django

    django.setup()
    from django.db import connection

    print(
        f"\nhow it grows: each size in a scratch database; ef per identity as chosen above "
        f"({', '.join(f'{n} {o}/{p}' for n, (o, p) in efs.items())}); {min(QUERIES, 100)} queries per identity"
    )
    rows = []
    for size in SCALE_SIZES:
        database = f"bench_ks_scale_{size}"
        kept = SCALE_KEEP and _kept_dataset(database, size)
        with connection.cursor() as cursor:
            if not kept:
                cursor.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            cursor.execute("SELECT datname FROM pg_database WHERE datname = %s", [DB_NAME])
            template = cursor.fetchone() is not None and size >= CHUNKS and not kept
            if kept:
                print(f"  {size}: the database kept from an earlier run ({database})", flush=True)
            elif template:
                # a template must have no other session (a pooled connection of this process, autovacuum)
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    [DB_NAME],
                )
                time.sleep(1)
                cursor.execute(f"CREATE DATABASE {database} TEMPLATE {DB_NAME}")
            else:
                cursor.execute(f"CREATE DATABASE {database}")
        try:
            env = {
                **os.environ,
                "ACHILLES_DB_NAME": database,
                "DJANGO_SETTINGS_MODULE": "achilles.settings",
                "BENCH_KS_SCALE_CHILD": json.dumps({"size": size, "efs": efs, "template": template, "kept": kept}),
            }
            out = subprocess.run(
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
            lines = [line for line in out.stdout.splitlines() if line.startswith("SCALE ")]
            for line in out.stdout.splitlines():
                if not line.startswith("SCALE "):
                    print("  " + line, flush=True)
            if out.returncode or not lines:
                print(f"  {size}: the child failed ({out.returncode})")
                continue
            rows.append(json.loads(lines[-1][6:]))
        finally:
            if not SCALE_KEEP:
                with connection.cursor() as cursor:
                    cursor.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    print(
        f"\n{'chunks':>8} {'HNSW build':>10} {'public HNSW':>11} {'index MB':>9} {'MB/100k':>8} "
        + " ".join(f"{name + ' ours/bare/compl p95, recall ours/peer':>44}" for name in IDENTITIES)
    )
    for row in rows:
        cells = []
        for name in IDENTITIES:
            r = row["identities"][name]
            cells.append(
                f"{r['ours_p95_ms']:>6.1f} /{r['peer_p95_ms']:>5.1f} /{r['complete_peer_p95_ms']:>5.1f} ms, "
                f"{r['ours_recall']:.3f}/{r['peer_recall']:.3f}"
            )
        print(
            f"{row['chunks']:>8} {row['hnsw_build_s']:>9.0f}s {row['public_hnsw_build_s']:>10.0f}s "
            f"{row['index_mb']:>9.0f} {row['index_mb'] * 100000 / row['chunks']:>8.0f} "
            + " ".join(f"{cell:>44}" for cell in cells),
            flush=True,
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
    sides = Sides(connection, embedder)
    qs = queries(min(QUERIES, 100))
    _warm_up(sides, qs)
    out = {
        "chunks": total,
        "index_mb": index_bytes / 2**20,
        "public_index_mb": public_bytes / 2**20,
        **timings,
        "identities": {},
    }
    for name, principals in IDENTITIES.items():
        ours_ef, peer_ef = spec["efs"][name]
        sides.set_ours_ef(ours_ef)
        sides.set_peer_ef(peer_ef)
        recall_qs = qs[:50]
        exact = [sides.exact(q, principals) for q in recall_qs]
        ours_recall = sum(recall(sides.ours_vector(q, principals), e) for q, e in zip(recall_qs, exact, strict=True))
        peer_recall = sum(recall(sides.peer_vector(q, principals), e) for q, e in zip(recall_qs, exact, strict=True))
        times = interleaved(sides, qs, principals)
        out["identities"][name] = {
            "ours_p95_ms": percentile(times["ours"], 0.95),
            "peer_p95_ms": percentile(times["bare"], 0.95),
            "complete_peer_p95_ms": percentile(times["complete"], 0.95),
            "ours_recall": ours_recall / len(recall_qs),
            "peer_recall": peer_recall / len(recall_qs),
        }
    print("SCALE " + json.dumps(out), flush=True)
