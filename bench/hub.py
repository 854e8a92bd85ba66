"""Hub: the mirror's reads and writes, the command queue under 4 sync agents, batch_wait's wake-up.

Ours vs the peer measured in the same run, in a scratch database (created, migrated, dropped here):
  * ``issues`` with three filters over BENCH_HUB_ISSUES (100k) mirrored issues, p95 — peer: the same
    query planned without indexes (what a mirror without them, or a JQL search per request, costs);
  * claim + report throughput with 4 concurrent sync agents (threads, each its own connection,
    through the services) — peer: the same loop with a plain ``FOR UPDATE`` (no SKIP LOCKED);
  * ``batch_wait`` wake-up after the last report, p95 — peer: a 1 s database polling loop;
  * mirror upload (issues/s, pages of 500) — peer: the ORM's ``update_or_create`` per issue; and the same
    pages through ``POST /api/hub/sync-agent/upload`` (in-process client) — peer: the service alone.
Targets (issue 12): p95 ≤ 50 ms, ≥ 2 000 commands/s, wake-up p95 ≤ 200 ms, ≥ 5 000 issues/s.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

from bench._scratch import run_in_scratch_database

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "achilles_bench_hub"
ISSUES = int(os.environ.get("BENCH_HUB_ISSUES", "100000"))
COMMANDS = int(os.environ.get("BENCH_HUB_COMMANDS", "20000"))
WAITS = int(os.environ.get("BENCH_HUB_WAITS", "40"))
UPLOAD = int(os.environ.get("BENCH_HUB_UPLOAD", "10000"))
PARTS = set(os.environ.get("BENCH_HUB_PARTS", "issues,claims,wait,upload").split(","))


def main() -> None:
    run_in_scratch_database(module="bench.hub", database=BENCH_DB)


# ----------------------------------------------------------------------------------- child


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def _seed_issues(cursor) -> None:
    cursor.execute(f"""
        INSERT INTO hub_issues (key, project, summary, status, issue_type, priority, assignee, duedate, sprint, labels,
                                description, fields, updated, content_sha256, mirrored_at)
        SELECT p.project || '-' || g, p.project, 'Задача ' || g || ' про ' || (ARRAY['платежи','отчёты','доступ','поиск'])[1 + g % 4],
               (ARRAY['To Do','In Progress','In Review','Done'])[1 + g % 4], 'Task', 'Medium',
               'user' || (g % 200), date '2026-10-01' + (g % 120), 'Спринт ' || (1 + g % 20),
               ARRAY['AWPCA'] || CASE WHEN g % 7 = 0 THEN ARRAY['backend'] ELSE ARRAY[]::text[] END, '', '{{}}'::jsonb,
               timestamptz '2026-11-01' + g * interval '1 second', md5(g::text) || md5(g::text), now()
        FROM generate_series(1, {ISSUES}) g
        CROSS JOIN LATERAL (SELECT (ARRAY['AURORA','BOREAS','CETUS','DRACO','ERIS'])[1 + g % 5] AS project) p""")
    cursor.execute("""INSERT INTO hub_notes (issue_id, fact_status, note, next_step, owner, updated_at)
                      SELECT id, (ARRAY['блокер','ждём','в работе'])[1 + id % 3], '', '', '', now()
                      FROM hub_issues WHERE id % 7 = 0""")
    cursor.execute("ANALYZE hub_issues; ANALYZE hub_notes")


def _bench_issues(user) -> dict:
    from django.db import connection

    from hub.contracts import IssueFilters
    from hub.selectors import issues_list

    cases = [{"project": "AURORA", "status": "In Progress", "assignee": f"user{a}"} for a in range(0, 200, 5)]
    cases += [{"project": "BOREAS", "sprint": f"Спринт {s}", "label": "backend"} for s in range(1, 21)]
    cases += [{"project": "CETUS", "overdue": True, "fact_status": "блокер"} for _ in range(10)]

    def run(times: list[float]) -> None:
        for case in cases * 3:
            started = time.perf_counter()
            issues_list(user=user, filters=IssueFilters(**case), limit=50)
            times.append(time.perf_counter() - started)

    if os.environ.get("BENCH_HUB_EXPLAIN"):
        from hub.selectors import issues_queryset

        for case in (cases[0], cases[45], cases[-1]):
            started = time.perf_counter()
            issues_list(user=user, filters=IssueFilters(**case))
            print(f"  {case}: {(time.perf_counter() - started) * 1000:.1f} ms")
        qs = issues_queryset(IssueFilters(**cases[-1])).select_related("notes")
        from django.db.models.expressions import RawSQL

        qs = qs.order_by(RawSQL("hub_issues.updated + interval '0 seconds'", []).desc(), "key")[:50]
        print("   " + qs.explain(analyze=True).replace("\n", "\n   "))
    ours: list[float] = []
    run([])  # warm-up
    run(ours)
    peer: list[float] = []
    with connection.cursor() as cursor:
        cursor.execute("SET enable_indexscan = off; SET enable_bitmapscan = off")
    run(peer)
    with connection.cursor() as cursor:
        cursor.execute("RESET enable_indexscan; RESET enable_bitmapscan")
    return {"ours": ours, "peer": peer, "queries": len(ours)}


def _seed_commands(cursor, n: int) -> None:
    cursor.execute("TRUNCATE hub_commands, hub_batches CASCADE")
    batches = max(1, n // 20)
    cursor.execute(
        f"INSERT INTO hub_batches (title, author, created_at) SELECT 'b' || g, 'api', now() "
        f"FROM generate_series(1, {batches}) g"
    )
    cursor.execute("""
        INSERT INTO hub_commands (batch_id, seq, type, payload, keys, depends_on, waits_for_batch, state, claims,
                                  lease_tokens, error, created_key, force_cancelled, created_at)
        SELECT b.id, s, 'ensure_comment', jsonb_build_object('type', 'ensure_comment', 'key', 'AURORA-' || s, 'body', 'x'),
               ARRAY['AURORA-' || s], '{}', false, 'queued', 0, '{}', '', '', false, now()
        FROM hub_batches b CROSS JOIN generate_series(1, 20) s""")
    cursor.execute("ANALYZE hub_commands")


PEER_CLAIM_SQL = """
WITH picked AS (
    SELECT c.id, md5(random()::text) AS token FROM hub_commands c WHERE c.state = 'queued' ORDER BY c.batch_id, c.seq
    LIMIT %(limit)s FOR UPDATE OF c
)
UPDATE hub_commands c SET state = 'claimed', claims = c.claims + 1, lease_token = picked.token,
    lease_tokens = array_append(c.lease_tokens, picked.token::varchar),
    lease_expires_at = now() + interval '120 seconds', claimed_at = now(), claimed_by_id = %(agent)s
FROM picked WHERE c.id = picked.id
RETURNING c.id, c.lease_token
"""


def _bench_claims(agents, *, peer: bool) -> dict:
    from django.db import OperationalError, connection, transaction

    from hub import protocol

    done, deadlocks = [0], [0]
    lock = threading.Lock()
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(agents))

    def retrying(call):
        # Plain FOR UPDATE keeps the rows it re-checked and dropped, so the peer's reports deadlock with
        # its claims now and then: count and retry (ours never waits on a row lock in the claim).
        while True:
            try:
                return call()
            except OperationalError as exc:
                if "deadlock" not in str(exc):
                    raise
                with lock:
                    deadlocks[0] += 1

    def claim(agent) -> list[dict]:
        if peer:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(PEER_CLAIM_SQL, {"limit": 50, "agent": agent.pk})
                return [{"id": i, "lease_token": t} for i, t in cursor.fetchall()]
        return protocol.sync_agent_claim(
            sync_agent=agent, version=6, launcher_version=1, max_commands=50, settings_version=1
        )["commands"]

    def worker(agent) -> None:
        from hub.models import Command

        try:
            barrier.wait()
            while True:
                got = retrying(lambda agent=agent: claim(agent))
                if not got:
                    # A blocked plain FOR UPDATE can come back empty while others still hold rows.
                    if not Command.objects.filter(state__in=["queued", "claimed"]).exists():
                        return
                    continue
                retrying(
                    lambda agent=agent, got=got: protocol.sync_agent_report(
                        sync_agent=agent,
                        results=[
                            {
                                "command_id": c["id"],
                                "lease_token": c["lease_token"],
                                "status": "done",
                                "result": {"changed": []},
                            }
                            for c in got
                        ],
                        rate_limited=[],
                    )
                )
                with lock:
                    done[0] += len(got)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(a,)) for a in agents]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return {"done": done[0], "seconds": elapsed, "rate": done[0] / elapsed, "deadlocks": deadlocks[0]}


def _bench_wait(user, agent, *, peer: bool, n: int) -> list[float]:
    from django.db import connection

    from hub import protocol, selectors, services

    latencies = []
    for _ in range(n):
        batch = services.batch_create(user=user, title="w", commands=[{"type": "refresh", "keys": ["AURORA-1"]}])
        returned: list[float] = []

        def waiter(batch=batch, returned=returned) -> None:
            try:
                if peer:
                    while not selectors.batch_finished(batch.id):
                        time.sleep(1.0)
                else:
                    services.batch_wait(user=user, batch_id=batch.id, timeout_minutes=1)
                returned.append(time.perf_counter())
            finally:
                connection.close()

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.05)
        got = protocol.sync_agent_claim(sync_agent=agent, version=6, launcher_version=1, settings_version=1)["commands"]
        protocol.sync_agent_report(
            sync_agent=agent,
            results=[
                {"command_id": c["id"], "lease_token": c["lease_token"], "status": "done", "result": {}} for c in got
            ],
            rate_limited=[],
        )
        committed = time.perf_counter()
        thread.join()
        latencies.append(returned[0] - committed)
    return latencies


def _upload_pages(first: int, count: int, version: str) -> list[list[dict]]:
    from hub.schemas import UploadIn

    issues = [
        {
            "key": f"ZETA-{i}",
            "project": "ZETA",
            "summary": f"Задача {i} {version}",
            "status": "To Do",
            "issue_type": "Task",
            "priority": "Medium",
            "assignee": f"user{i % 50}",
            "duedate": "2026-12-01",
            "sprint": "Спринт 2",
            "labels": ["AWPCA"],
            "updated": f"2026-11-30T{10 if version == 'a' else 11}:00:00.000+0000",
            "fields": {"description": f"Описание {i}", "customfield_10010": i},
            "links": [{"link_type": "Blocks", "direction": "outward", "other_key": f"ZETA-{i + 1}"}],
            "comments": [
                {
                    "id": str(i * 10 + c),
                    "author": "jdoe",
                    "created": "2026-11-29T10:00:00.000+0000",
                    "body": f"комментарий {c}",
                }
                for c in range(2)
            ],
        }
        for i in range(first, first + count)
    ]
    return [
        [i.model_dump() for i in UploadIn.model_validate({"issues": issues[p : p + 500]}).issues]
        for p in range(0, len(issues), 500)
    ]


def _bench_upload_rest() -> float:
    """New issues/s through ``POST /api/hub/sync-agent/upload`` (middleware, auth, parsing, the service),
    with Django's test client in process — no socket, so the figure is the hub's own cost."""
    import json

    from django.test import Client

    from hub.protocol import sync_agent_create

    _agent, token = sync_agent_create(name="bench-rest")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    bodies = []
    for page in _upload_pages(2_000_000, UPLOAD, "a"):
        for issue in page:  # back to the JSON the sync agent sends
            issue["updated"] = issue["updated"].isoformat()
            issue["duedate"] = issue["duedate"].isoformat()
            for comment in issue["comments"]:
                comment["created"] = comment["created"].isoformat()
        bodies.append(json.dumps({"issues": page}))
    started = time.perf_counter()
    for body in bodies:
        response = client.post("/api/hub/sync-agent/upload", body, content_type="application/json")
        if response.status_code != 200:
            raise RuntimeError(f"upload over REST: {response.status_code} {response.content[:300]!r}")
    return UPLOAD / (time.perf_counter() - started)


def _bench_upload() -> dict:
    from django.db import transaction

    from hub.models import MirrorComment, MirrorIssue, MirrorLink
    from hub.protocol import mirror_upload

    results = {}
    for label, version in (("insert", "a"), ("update", "b"), ("unchanged", "b")):
        pages = _upload_pages(1, UPLOAD, version)
        started = time.perf_counter()
        for page in pages:
            mirror_upload(sync_agent=None, sync_run_id=None, issues=page)
        results[label] = UPLOAD / (time.perf_counter() - started)
    # Peer: the ORM, one issue at a time (update_or_create + replace links and comments).
    n = max(500, UPLOAD // 10)
    pages = _upload_pages(1_000_000, n, "a")
    started = time.perf_counter()
    for page in pages:
        with transaction.atomic():
            for item in page:
                issue, _ = MirrorIssue.objects.update_or_create(
                    key=item["key"],
                    defaults={
                        "project": item["project"],
                        "summary": item["summary"],
                        "status": item["status"] or "",
                        "issue_type": item["issue_type"] or "",
                        "priority": item["priority"] or "",
                        "assignee": item["assignee"] or "",
                        "duedate": item["duedate"],
                        "sprint": item["sprint"],
                        "labels": item["labels"],
                        "fields": item["fields"],
                        "updated": item["updated"],
                        "content_sha256": "0" * 64,
                    },
                )
                MirrorLink.objects.filter(issue=issue).delete()
                MirrorComment.objects.filter(issue=issue).delete()
                MirrorLink.objects.bulk_create([MirrorLink(issue=issue, **link) for link in item["links"]])
                MirrorComment.objects.bulk_create(
                    [
                        MirrorComment(
                            issue=issue, jira_id=c["id"], author=c["author"], created=c["created"], body=c["body"]
                        )
                        for c in item["comments"]
                    ]
                )
    results["peer"] = n / (time.perf_counter() - started)
    return results


def child() -> None:
    import logging

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from achilles.services import user_ensure
    from hub.permissions import hub_group_ensure
    from hub.protocol import sync_agent_create

    for noisy in ("hub", "celery"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    hub_group_ensure()
    user, _ = user_ensure(username="bench-hub", groups=["hub"])
    with connection.cursor() as cursor:
        _seed_issues(cursor)
    print(
        f"  scratch database {BENCH_DB}: migrated, {ISSUES:,} issues seeded in {time.perf_counter() - started:.1f}s",
        flush=True,
    )
    # The Knowledge Store feed is a Celery task queued on commit; the bench measures the mirror alone.
    import hub.tasks

    hub.tasks.mirror_to_knowledge_on_commit = lambda ids: None

    agents = [sync_agent_create(name=f"bench-{i}")[0] for i in range(4)]
    ms = 1000.0
    rows = []
    if "issues" in PARTS:
        issues = _bench_issues(user)
        rows.append(
            (
                f"issues, 3 filters, {ISSUES // 1000}k issues: p50 / p95",
                f"{statistics.median(issues['ours']) * ms:.1f} / {_pct(issues['ours'], 0.95) * ms:.1f} ms",
                f"{statistics.median(issues['peer']) * ms:.1f} / {_pct(issues['peer'], 0.95) * ms:.1f} ms (no indexes)",
                "p95 ≤ 50 ms",
                _pct(issues["ours"], 0.95) <= 0.05,
            )
        )
    if "claims" in PARTS:
        with connection.cursor() as cursor:
            _seed_commands(cursor, COMMANDS)
        ours_claims = _bench_claims(agents, peer=False)
        with connection.cursor() as cursor:
            _seed_commands(cursor, COMMANDS)
        peer_claims = _bench_claims(agents, peer=True)
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE hub_commands, hub_batches CASCADE")
        rows.append(
            (
                f"claim + report, 4 sync agents, {COMMANDS:,} commands",
                f"{ours_claims['rate']:,.0f} commands/s",
                f"{peer_claims['rate']:,.0f} commands/s (FOR UPDATE, no SKIP LOCKED; {peer_claims['deadlocks']} deadlocks)",
                "≥ 2 000/s",
                ours_claims["rate"] >= 2000,
            )
        )
    if "wait" in PARTS:
        waits = _bench_wait(user, agents[0], peer=False, n=WAITS)
        peer_waits = _bench_wait(user, agents[0], peer=True, n=max(5, WAITS // 4))
        rows.append(
            (
                "batch_wait wake-up after the last report: p50 / p95",
                f"{statistics.median(waits) * ms:.0f} / {_pct(waits, 0.95) * ms:.0f} ms",
                f"{statistics.median(peer_waits) * ms:.0f} / {_pct(peer_waits, 0.95) * ms:.0f} ms (1 s DB polling)",
                "p95 ≤ 200 ms",
                _pct(waits, 0.95) <= 0.2,
            )
        )
    if "upload" in PARTS:
        upload = _bench_upload()
        rows.append(
            (
                f"mirror upload, {UPLOAD:,} issues in pages of 500",
                f"{upload['insert']:,.0f} new / {upload['update']:,.0f} changed / {upload['unchanged']:,.0f} same issues/s",
                f"{upload['peer']:,.0f} issues/s (ORM update_or_create)",
                "≥ 5 000/s",
                upload["insert"] >= 5000,
            )
        )
        rest = _bench_upload_rest()
        rows.append(
            (
                "mirror upload over REST (POST …/sync-agent/upload)",
                f"{rest:,.0f} new issues/s",
                f"{upload['insert']:,.0f} issues/s (the service alone, no HTTP)",
                "≥ 5 000/s",
                rest >= 5000,
            )
        )
    width = max(len(r[0]) for r in rows)
    print(f"  {'':{width}}  {'ours':46} {'peer':52} target")
    for name, ours_v, peer_v, target, ok in rows:
        print(f"  {name:{width}}  {ours_v:46} {peer_v:52} {target} {'OK' if ok else 'MISSED'}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    child()
