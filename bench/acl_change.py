"""bench/acl_change: a read restriction reaching a third of a 100k-chunk store, timed (issue 29).

The store is bench/knowledge's dataset (``BENCH_KS_CHUNKS``, 100k chunks in records of five),
kept in a database of its own, ``bench_acl_change`` (built on the first run; bench/knowledge's
other sizes do not replace it). The change is the one a Confluence permission sync
writes when a space's home page gains a view restriction: ``knowledge.facade.records_access_set``
gives ``BENCH_ACL_CHANGE_RECORDS`` (6 670: ≈ 33k chunks, the 10 000-page sync's figure) records
readable by ``everyone`` a clause (``group:finance``), in one transaction, then takes it away again.
Both writes are timed (wall, and the PostgreSQL backend's CPU), with the chunk rows' updates that
stayed on their page (HOT: no index entry written) against those that went to another page (a new
entry in every index of ``knowledge_chunks``, the HNSW graph included), and after each one a check
that search follows: the restricted records vanish for an identity outside ``group:finance`` and
stay for one inside it. ``BENCH_ACL_CHANGE_FIELD=acl`` changes the any-of list instead (``everyone``
→ ``group:finance``). The last line is ``RESULT {json}``.

    BENCH_KS_CHUNKS=100000 python -m bench acl_change
"""

from __future__ import annotations

import json
import os
import time

RECORDS = int(os.environ.get("BENCH_ACL_CHANGE_RECORDS", "6670"))
FIELD = os.environ.get("BENCH_ACL_CHANGE_FIELD", "acl_also")
TARGET_S = 60.0
OUTSIDE = ["everyone", "public", "group:g1"]
INSIDE = [*OUTSIDE, "group:finance"]


def _backend_cpu_s(cursor) -> float:
    """This connection's PostgreSQL backend's CPU seconds (user + system) from /proc."""
    cursor.execute("SELECT pg_backend_pid()")
    pid = cursor.fetchone()[0]
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _chunk_updates(cursor) -> tuple[int, int]:
    cursor.execute("SELECT pg_stat_force_next_flush()")
    cursor.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'knowledge_chunks'",
    )
    upd, hot = cursor.fetchone()
    return upd, hot


def _visible(cursor, ids: list[int], principals: list[str]) -> int:
    """Chunks of ``ids`` the principals may read (the search's access test on the chunk rows)."""
    cursor.execute(
        "SELECT count(*) FROM knowledge_chunks c WHERE c.record_id = ANY(%s) "
        "AND knowledge_acl_allows(c.acl, c.acl_also, %s::text[])",
        [ids, principals],
    )
    return cursor.fetchone()[0]


def _write(cursor, access: dict[str, tuple[list[str], list[list[str]]]]) -> dict:
    from django.db import transaction

    from knowledge import facade

    upd0, hot0 = _chunk_updates(cursor)
    cpu0 = _backend_cpu_s(cursor)
    started = time.monotonic()
    with transaction.atomic():
        changed = facade.records_access_set(source_system="bench", access=access)
    seconds = time.monotonic() - started
    cpu = _backend_cpu_s(cursor) - cpu0
    upd1, hot1 = _chunk_updates(cursor)
    return {
        "records": changed,
        "seconds": round(seconds, 1),
        "postgres_cpu_s": round(cpu, 1),
        "chunk_updates": upd1 - upd0,
        "hot": hot1 - hot0,
    }


DB_NAME = "bench_acl_change"


def main() -> None:
    from achilles.llm.builtin import HashEmbeddingProvider
    from bench import knowledge

    knowledge.DB_NAME = DB_NAME
    connection, old_name = knowledge._setup_database(HashEmbeddingProvider(dim=384))
    try:
        result = _run(connection)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=True)
        connection.close_pool()
    print("RESULT " + json.dumps(result, ensure_ascii=False), flush=True)


def _run(connection) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_chunks")
        total = cursor.fetchone()[0]
        cursor.execute(
            "SELECT id, external_id FROM knowledge_records WHERE acl = '{everyone}' AND acl_also IS NULL "
            "ORDER BY id LIMIT %s",
            [RECORDS],
        )
        picked = cursor.fetchall()
        ids = [pk for pk, _ in picked]
        cursor.execute("SELECT count(*) FROM knowledge_chunks WHERE record_id = ANY(%s)", [ids])
        chunks = cursor.fetchone()[0]
        cursor.execute("SELECT pg_relation_size('knowledge_chunks'), pg_total_relation_size('knowledge_chunks')")
        heap, whole = cursor.fetchone()
        cursor.execute("SELECT coalesce(reloptions::text, '') FROM pg_class WHERE relname = 'knowledge_chunks'")
        options = cursor.fetchone()[0]
        print(
            f"store: {total} chunks (heap {heap / 2**20:.0f} MB, with indexes and TOAST {whole / 2**20:.0f} MB, "
            f"options {options or 'none'}); changing {len(ids)} records / {chunks} chunks ({FIELD})",
            flush=True,
        )
        if FIELD == "acl":
            restricted = {eid: (["group:finance"], []) for _, eid in picked}
        else:
            restricted = {eid: (["everyone"], [["group:finance"]]) for _, eid in picked}
        before = {"outside": _visible(cursor, ids, OUTSIDE), "inside": _visible(cursor, ids, INSIDE)}
        load = os.getloadavg()[0]
        restrict = _write(cursor, restricted)
        after = {"outside": _visible(cursor, ids, OUTSIDE), "inside": _visible(cursor, ids, INSIDE)}
        lift = _write(cursor, {eid: (["everyone"], []) for _, eid in picked})
        back = {"outside": _visible(cursor, ids, OUTSIDE), "inside": _visible(cursor, ids, INSIDE)}
    follows = (
        before == {"outside": chunks, "inside": chunks} and after == {"outside": 0, "inside": chunks} and back == before
    )
    for name, row in (("restrict", restrict), ("lift", lift)):
        print(
            f"  {name}: {row['records']} records, {row['seconds']} s wall, {row['postgres_cpu_s']} s PostgreSQL CPU, "
            f"{row['chunk_updates']} chunk rows updated ({row['hot']} on their page); "
            f"{'met' if row['seconds'] <= TARGET_S else 'NOT met'}: ≤ {TARGET_S:.0f} s",
            flush=True,
        )
    print(f"  search follows: {'yes' if follows else 'NO'} (visible chunks {before} → {after} → {back})", flush=True)
    return {
        "bench": "acl_change",
        "store_chunks": total,
        "records": len(ids),
        "chunks": chunks,
        "field": FIELD,
        "load_1m": round(load, 1),
        "restrict": restrict,
        "lift": lift,
        "search_follows": follows,
        "target_s": TARGET_S,
    }
