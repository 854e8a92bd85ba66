"""bench/acl_clauses: what «all of» access costs search (issue 23, on bench/knowledge's dataset).

A record may carry ``acl_also``, further any-of lists («clauses») a reader must also meet (a
Confluence page under restricted ancestors). Every search path asks ``knowledge_acl_allows(acl,
acl_also, principals)``. This bench measures ours (``knowledge.facade.search``) for each of
bench/knowledge's identities in two states of the same dataset, alternating in ``BENCH_CLAUSES_CYCLES``
(4) blocks of the queries so that the machine's drift falls on both alike:

  * **without** — no record carries a clause (what a store with no Confluence restriction pays);
  * **with** — ``BENCH_CLAUSES_SHARE`` (10 %) of the records carry one clause, and a quarter of those
    a second one (as pages under two restricted ancestors), each clause a group list drawn so that
    the broad identity meets some and fails others.

Per identity: p50/p95 of each state, the records it may read in each, and the ratio with ÷ without.
Target: no identity's p95 more than 10 % slower (1.10×). The dataset is left as it was found (no
clause). The last line is ``RESULT {json}``.

    python -m bench acl_clauses
    BENCH_KS_CHUNKS=20000 BENCH_KS_QUERIES=100 python -m bench acl_clauses   # quicker, smaller
"""

from __future__ import annotations

import json
import os
import time

SHARE = float(os.environ.get("BENCH_CLAUSES_SHARE", "0.10"))
TARGET = 1.10
CYCLES = int(os.environ.get("BENCH_CLAUSES_CYCLES", "4"))

# A clause per chosen record: groups g1..g4 in turn with g0 (the broad identity is in g1 and g2),
# so some clauses keep records visible to it and others hide them.
SET_CLAUSES_SQL = """
UPDATE knowledge_records SET acl_also = CASE
    WHEN id %% 4 = 0 THEN jsonb_build_array(
        jsonb_build_array('group:g0', 'group:g' || (1 + id %% 4)), jsonb_build_array('group:g' || (1 + (id / 4) %% 3)))
    ELSE jsonb_build_array(jsonb_build_array('group:g0', 'group:g' || (1 + id %% 4)))
END
WHERE (hashtext(id::text) & 2147483647) %% 1000 < %(per_mille)s
"""
CLEAR_CLAUSES_SQL = "UPDATE knowledge_records SET acl_also = NULL WHERE acl_also IS NOT NULL"


def _readable(cursor, principals) -> int:
    cursor.execute(
        "SELECT count(*) FROM knowledge_records WHERE knowledge_acl_allows(acl, acl_also, %s::text[])",
        [sorted(principals)],
    )
    return cursor.fetchone()[0]


def _cpu_seconds(connection) -> dict[int, float]:
    """CPU seconds so far of this process (key 0) and of each PostgreSQL backend of this database."""
    from bench._confluence import _cpu, _proc_cpu

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        pids = [pid for (pid,) in cursor.fetchall()]
    seconds = {0: _cpu()}
    for pid in pids:
        try:
            seconds[pid] = _proc_cpu(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return seconds


def _round(sides, qs: list[str], identities: dict) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Milliseconds per query of ours, identity by identity, the order rotating query by query; and
    per identity the CPU seconds (this process and the database's backends) its queries took."""
    names = list(identities)
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu = dict.fromkeys(names, 0.0)
    for i, q in enumerate(qs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            before = _cpu_seconds(sides.connection)
            started = time.perf_counter()
            sides.ours(q, identities[name])
            times[name].append((time.perf_counter() - started) * 1000)
            after = _cpu_seconds(sides.connection)
            cpu[name] += sum(v - before.get(pid, 0.0) for pid, v in after.items())
    return times, cpu


def main() -> None:
    from achilles.llm.builtin import HashEmbeddingProvider
    from bench.knowledge import IDENTITIES, QUERIES, Sides, _setup_database, percentile, queries

    embedder = HashEmbeddingProvider(dim=384)
    connection, old_name = _setup_database(embedder)
    result: dict = {"bench": "acl_clauses", "share": SHARE, "identities": {}}
    try:
        sides = Sides(connection, embedder)
        qs = queries(QUERIES)
        with connection.cursor() as cursor:
            cursor.execute(CLEAR_CLAUSES_SQL)
            cursor.execute("SELECT count(*) FROM knowledge_chunks")
            result["chunks"] = cursor.fetchone()[0]
        for q in qs[:20]:  # warm the caches and the connection
            for principals in IDENTITIES.values():
                sides.ours(q, principals)
        rounds: dict[str, dict[str, list[float]]] = {
            label: {name: [] for name in IDENTITIES} for label in ("without", "with")
        }
        readable: dict[str, dict[str, int]] = {}
        cpu: dict[str, dict[str, float]] = {label: dict.fromkeys(IDENTITIES, 0.0) for label in rounds}
        try:
            # the two states alternate in CYCLES blocks of the queries, so the machine's drift (a
            # shared, loaded machine) falls on both alike
            block = max(1, len(qs) // CYCLES)
            for cycle in range(CYCLES):
                for label in ("without", "with"):
                    with connection.cursor() as cursor:
                        cursor.execute(CLEAR_CLAUSES_SQL)
                        if label == "with":
                            cursor.execute(SET_CLAUSES_SQL, {"per_mille": int(SHARE * 1000)})
                            cursor.execute("SELECT count(*) FROM knowledge_records WHERE acl_also IS NOT NULL")
                            result["records_with_clauses"] = cursor.fetchone()[0]
                        cursor.execute("ANALYZE knowledge_records, knowledge_chunks")
                        readable[label] = {name: _readable(cursor, p) for name, p in IDENTITIES.items()}
                    print(f"cycle {cycle + 1}/{CYCLES}, «{label}»: {block} queries per identity …", flush=True)
                    times, spent = _round(sides, qs[cycle * block : (cycle + 1) * block], IDENTITIES)
                    for name in IDENTITIES:
                        rounds[label][name].extend(times[name])
                        cpu[label][name] += spent[name]
        finally:
            with connection.cursor() as cursor:
                cursor.execute(CLEAR_CLAUSES_SQL)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=True)
        connection.close_pool()
    print(
        f"\n{result['chunks']} chunks; {result['records_with_clauses']} records with clauses in the «with» round "
        f"({SHARE:.0%}); ours, p50 / p95 in ms; records readable without → with"
    )
    print(
        f"{'identity':<10} {'without':>15} {'with':>15} {'p95 ratio':>10} {'CPU ms/search':>16} {'CPU ratio':>10}"
        f" {'readable':>17}"
    )
    worst = worst_cpu = 0.0
    for name in IDENTITIES:
        p50 = {label: percentile(times[name], 0.5) for label, times in rounds.items()}
        p95 = {label: percentile(times[name], 0.95) for label, times in rounds.items()}
        ratio = p95["with"] / p95["without"]
        worst = max(worst, ratio)
        cells = " ".join(f"{p50[label]:>6.1f} / {p95[label]:>6.1f}" for label in rounds)
        per_search = {label: 1000 * cpu[label][name] / max(1, len(rounds[label][name])) for label in rounds}
        cpu_ratio = per_search["with"] / max(per_search["without"], 1e-9)
        worst_cpu = max(worst_cpu, cpu_ratio)
        print(
            f"{name:<10} {cells} {ratio:>9.2f}x {per_search['without']:>7.1f} → {per_search['with']:<6.1f}"
            f" {cpu_ratio:>9.2f}x {readable['without'][name]:>8} → {readable['with'][name]:<7}",
            flush=True,
        )
        result["identities"][name] = {
            "p50_ms": {label: round(v, 2) for label, v in p50.items()},
            "p95_ms": {label: round(v, 2) for label, v in p95.items()},
            "p95_ratio": round(ratio, 3),
            "cpu_ms_per_search": {label: round(v, 2) for label, v in per_search.items()},
            "cpu_ratio": round(cpu_ratio, 3),
            "readable": {"without": readable["without"][name], "with": readable["with"][name]},
        }
    met = worst <= TARGET
    print(
        f"worst p95 ratio {worst:.2f}× (target ≤ {TARGET:.2f}×: {'met' if met else 'not met'}); load {os.getloadavg()[0]:.1f}"
    )
    result["worst_p95_ratio"] = round(worst, 3)
    result["target_met"] = met
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print("RESULT " + json.dumps(result, ensure_ascii=False), flush=True)
