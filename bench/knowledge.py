"""bench/knowledge: our ``search`` vs the peer — pgvector-python's published hybrid RRF query.

Builds (once; kept between runs in its own database ``bench_knowledge``) 100k chunks of synthetic
Russian-like text in 20k records with 384-dim hash embeddings and a realistic ACL spread, then
measures, in one run, p50/p95 latency of ``knowledge.facade.search`` and of the peer query (two
CTEs + FULL OUTER JOIN, same tables, same ACL filter in both CTEs) for three identities:
broad (≈ 65 % visible), narrow (1 %) and anonymous (``public``, 5 %); plus recall@10 of our vector
side against exact search and the share of narrow queries that come back with a full k.

    make bench            # every benchmark
    python -m bench knowledge
    BENCH_KS_QUERIES=100 BENCH_KS_CHUNKS=20000 python -m bench knowledge   # quicker, smaller
"""

from __future__ import annotations

import io
import itertools
import os
import random
import time

DATASET_VERSION = "v3"
CHUNKS = int(os.environ.get("BENCH_KS_CHUNKS", "100000"))
CHUNKS_PER_RECORD = 5
QUERIES = int(os.environ.get("BENCH_KS_QUERIES", "200"))
K = 8
EF_SWEEP = tuple(int(x) for x in os.environ.get("BENCH_KS_EF", "40,250").split(","))
SEED = 20261129
GROUPS = [f"group:g{i}" for i in range(20)]
USERS = [f"user:{1000 + i}" for i in range(500)]

IDENTITIES = {
    # a signed-in employee in two groups: sees `everyone`, `public`, their groups and own records
    "broad": frozenset({"everyone", "public", "group:g1", "group:g2", "user:1001"}),
    # a contractor-like principal set that sees 1 % of the records
    "narrow": frozenset({"group:narrow"}),
    "anonymous": frozenset({"public"}),
}

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


# --------------------------------------------------------------------------- synthetic corpus

STOP = ["и", "в", "не", "на", "что", "с", "по", "как", "это", "к", "но", "из", "у", "за", "от", "о", "так", "же", "для", "все", "до", "она", "вы", "его", "только", "или", "бы", "уже", "было", "если", "при", "когда", "был", "мы", "нет", "ни", "ли", "под", "то", "они", "есть", "где", "там", "даже", "через"]
_ONSETS = ["б", "в", "г", "д", "ж", "з", "к", "л", "м", "н", "п", "р", "с", "т", "ф", "х", "ц", "ч", "ш", "пр",
           "ст", "тр", "кр", "гр", "бл", "сп", "зв", "др"]
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


def dataset_fresh(cursor) -> bool:
    cursor.execute("SELECT to_regclass('bench_meta') IS NOT NULL")
    if not cursor.fetchone()[0]:
        return False
    cursor.execute("SELECT value FROM bench_meta WHERE key = 'dataset'")
    row = cursor.fetchone()
    return bool(row and row[0] == f"{DATASET_VERSION}:{CHUNKS}")


def build(cursor, embedder) -> None:
    """Build the dataset unless another process already did (concurrent callers wait and skip)."""
    cursor.execute("SELECT pg_advisory_lock(%s)", [BUILD_LOCK])
    try:
        if not dataset_fresh(cursor):
            _build(cursor, embedder)
    finally:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [BUILD_LOCK])


def _build(cursor, embedder) -> None:
    corpus = Corpus()
    n_records = CHUNKS // CHUNKS_PER_RECORD
    cursor.execute("TRUNCATE knowledge_records RESTART IDENTITY CASCADE")
    cursor.execute("DROP INDEX IF EXISTS knowledge_chunk_emb_hnsw32")
    started = time.monotonic()
    records = io.StringIO()
    chunk_rows = []
    for rid in range(1, n_records + 1):
        topic = corpus.rng.randrange(len(corpus.topics))
        acl = corpus.acl()
        author = corpus.rng.choice(USERS)
        records.write(f"{rid}\tbench\tdoc-{rid}\tДокумент {rid}\thttps://wiki.example/{rid}\t{author}\t"
                      "{" + ",".join(acl) + "}\t1\tbench\t\\N\t\n")
        for ordinal in range(CHUNKS_PER_RECORD):
            chunk_rows.append((rid, ordinal, f"Документ {rid}", corpus.text(topic, corpus.rng.randint(60, 110))))
    records.seek(0)
    with cursor.copy("COPY knowledge_records (id, source_system, external_id, title, url, author_principal_id, "
                     "acl, trust_score, origin, embedding_model, content_hash) FROM STDIN") as copy:
        copy.write(records.read())
    print(f"  records: {n_records} in {time.monotonic() - started:.1f}s; embedding {len(chunk_rows)} chunks …", flush=True)
    batch = 2000
    for start in range(0, len(chunk_rows), batch):
        rows = chunk_rows[start:start + batch]
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
    print("  building the HNSW index …", flush=True)
    cursor.execute("SET maintenance_work_mem = '512MB'")
    # the same index as migrations 0005 (main) and 0004 (public, maintained during COPY)
    cursor.execute("CREATE INDEX knowledge_chunk_emb_hnsw32 ON knowledge_chunks "
                   "USING hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128)")
    cursor.execute("ANALYZE knowledge_records")
    cursor.execute("ANALYZE knowledge_chunks")
    cursor.execute("CREATE TABLE IF NOT EXISTS bench_meta (key text PRIMARY KEY, value text)")
    cursor.execute("INSERT INTO bench_meta VALUES ('dataset', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                   [f"{DATASET_VERSION}:{CHUNKS}"])
    print(f"  built in {time.monotonic() - started:.0f}s", flush=True)


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


# --------------------------------------------------------------------------- measuring

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main() -> None:
    import django

    django.setup()
    from django.db import connection

    from achilles.llm.builtin import HashEmbeddingProvider
    from achilles.models import AgentModel
    from knowledge import facade
    from knowledge.search import vector as ks_vector

    settings_dict = connection.settings_dict
    settings_dict.setdefault("TEST", {})["NAME"] = "bench_knowledge"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=True, serialize=False)
    try:
        embedder = HashEmbeddingProvider(dim=384)
        AgentModel.objects.update_or_create(name="bench-hash-384", defaults={
            "provider": "hash", "kind": "embedding", "is_default": True, "options": {"dim": 384}})
        with connection.cursor() as cursor:
            if not dataset_fresh(cursor):
                print(f"building the dataset ({CHUNKS} chunks; kept in database bench_knowledge for next runs)")
                build(cursor, embedder)
            else:
                print(f"dataset: {CHUNKS} chunks (cached in database bench_knowledge)")
            cursor.execute("SELECT count(*) FROM knowledge_chunks")
            total = cursor.fetchone()[0]
        qs = queries(QUERIES)
        # warm-up: caches and the HNSW graph pages
        for q in qs[:20]:
            for principals in IDENTITIES.values():
                facade.search(q, facade.Identity(principals), K)
        visible = {}
        with connection.cursor() as cursor:
            for name, principals in IDENTITIES.items():
                cursor.execute("SELECT count(*) FROM knowledge_chunks WHERE acl && %s::text[]", [sorted(principals)])
                visible[name] = cursor.fetchone()[0] / max(total, 1)
        print(f"\n{total} chunks, {len(qs)} queries per identity, k={K}; peer = pgvector-python hybrid RRF "
              f"(hnsw.ef_search 40, no iterative scan); ours at hnsw.ef_search = {', '.join(map(str, EF_SWEEP))}")
        default_ef = ks_vector.HNSW_EF_SEARCH
        try:
            for ef in EF_SWEEP:
                ks_vector.HNSW_EF_SEARCH = ef
                print(f"\nours with hnsw.ef_search={ef}" + ("  (the default)" if ef == default_ef else ""))
                print(f"{'identity':<10} {'visible':>8} {'ours p50':>9} {'ours p95':>9} {'peer p50':>9} {'peer p95':>9} "
                      f"{'ratio p95':>9} {'ours full k':>11} {'peer full k':>11} {'recall@10':>9}")
                for name, principals in IDENTITIES.items():
                    row = measure(connection, embedder, qs, principals)
                    recall = vector_recall(connection, embedder, qs[:100], principals)
                    print(f"{name:<10} {visible[name]:>7.1%} {row['ours_p50']:>7.1f}ms {row['ours_p95']:>7.1f}ms "
                          f"{row['peer_p50']:>7.1f}ms {row['peer_p95']:>7.1f}ms {row['ours_p95'] / row['peer_p95']:>8.2f}x "
                          f"{row['ours_full']:>10.1%} {row['peer_full']:>10.1%} {recall:>9.3f}", flush=True)
        finally:
            ks_vector.HNSW_EF_SEARCH = default_ef
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=True)


def measure(connection, embedder, qs: list[str], principals) -> dict:
    """p50/p95 and full-k share of our search and of the peer, interleaved query by query."""
    from knowledge import facade
    from knowledge.search.vector import vector_literal

    identity = facade.Identity(principals=principals)
    ours, peer, ours_full, peer_full = [], [], 0, 0
    for q in qs:
        started = time.perf_counter()
        result = facade.search(q, identity, K)
        ours.append((time.perf_counter() - started) * 1000)
        ours_full += len(result.candidates) == K
        started = time.perf_counter()
        vector = embedder.embed([q])[0]
        with connection.cursor() as cursor:
            cursor.execute(PEER_SQL, {"embedding": vector_literal(vector), "query": q,
                                      "principals": sorted(principals), "k": 60, "limit": K})
            rows = cursor.fetchall()
        peer.append((time.perf_counter() - started) * 1000)
        peer_full += len(rows) == K
    return {"ours_p50": percentile(ours, .5), "ours_p95": percentile(ours, .95), "peer_p50": percentile(peer, .5),
            "peer_p95": percentile(peer, .95), "ours_full": ours_full / len(qs), "peer_full": peer_full / len(qs)}


def vector_recall(connection, embedder, qs: list[str], principals) -> float:
    """recall@10 of our vector statement (as ``search`` runs it) against an exact scan."""
    from django.db import transaction

    from knowledge.search.hybrid import candidate_depth
    from knowledge.search.lexical import lexical_lists
    from knowledge.search.vector import ef_search, vector_list, vector_literal

    hits = 0.0
    depth = candidate_depth(K)
    for q in qs:
        vector = embedder.embed([q])[0]
        with transaction.atomic(), connection.cursor() as cursor:
            # exactly as search() builds its vector list: HNSW candidates + lexical candidates
            lexical = lexical_lists(cursor, q, sorted(principals), depth, K, ef_search=ef_search(depth))
            ranked = vector_list(cursor, vector, sorted(principals), depth, -1.0, extra=lexical.visible if lexical else ())
            approx = set(ranked[:10])
            cursor.execute("SELECT set_config('enable_indexscan', 'off', true)")
            cursor.execute("SELECT id FROM knowledge_chunks WHERE embedding IS NOT NULL AND acl && %(p)s::text[] "
                           "ORDER BY embedding <=> %(vec)s::vector LIMIT 10",
                           {"vec": vector_literal(vector), "p": sorted(principals)})
            exact = {row[0] for row in cursor.fetchall()}
        hits += len(approx & exact) / max(1, len(exact))
    return hits / len(qs)
