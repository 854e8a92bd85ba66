"""bench/http: the request path's cost — CPU per authenticated request, ours beside a FastAPI peer.

Two routes a client polls: ``GET /api/me`` (the token, the user and the groups) and
``GET /api/conversations`` (the first page of the user's threads). Ours is the platform as deployed:
``achilles.asgi`` on daphne. The peer (``bench/_http_peer.py``) is FastAPI on uvicorn with a psycopg
async pool, running **the same SQL statements** on the same database: this bench records the
statements Django runs for each route (one captured request each) and hands them to the peer, so
the difference is the framework, middleware and serialisation — not the queries.

Per (side, web processes 1 / 2, clients 16 / 64, route): requests/s, p50/p95, and the figure the
target is about, **server CPU per request** — the web processes' user+system CPU time (read from
``/proc``) over the measured window divided by the requests answered, so it does not depend on
how busy the rest of the machine is the way wall-clock figures do. The load generator is an
asyncio httpx client in a process of its own; with two web processes, clients alternate between
them (as a proxy would). Target (performance issue): ours ≤ 1.5× the peer's CPU per request.

    python -m bench http
    BENCH_HTTP_SECONDS=10 python -m bench http        # longer windows (default 5 s after a 2 s warm-up)
    PORT=8700 python -m bench http                    # the servers on PORT+40, +41 (the machine's share)

The last line is ``RESULT {json}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._scratch import run_in_scratch_database

ROOT = Path(__file__).resolve().parent.parent
DURATION_S = float(os.environ.get("BENCH_HTTP_SECONDS", "5"))
WARMUP_S = float(os.environ.get("BENCH_HTTP_WARMUP", "2"))
CLIENTS = tuple(int(c) for c in os.environ.get("BENCH_HTTP_CLIENTS", "16,64").split(","))
PROCESSES = tuple(int(p) for p in os.environ.get("BENCH_HTTP_PROCESSES", "1,2").split(","))
ROUTES = ("/api/me", "/api/conversations")
TARGET = 1.5
BENCH_DB = "achilles_bench_http"
TICKS = os.sysconf("SC_CLK_TCK")
# BENCH_HTTP_PROFILE=1: py-spy (``pip install py-spy``) samples each side's (first) web process over
# each measured window; the collapsed stacks land in var/bench-http-profile-<side>-<route>-<clients>.txt
# and the breakdown by layer (bench/_stacks.py) is printed after the table.
PROFILE = os.environ.get("BENCH_HTTP_PROFILE") == "1"


# The servers listen on PORT + 40 … + 43 (the PORT base of the machine's share; 8000 if unset).
PORT_BASE = int(os.environ.get("PORT") or "8000") + 40


def _free_port(n: int) -> int:
    """The n-th port from the base, checked free (a busy port fails here rather than mid-run)."""
    port = PORT_BASE + n
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers: the last run's TIME_WAIT is fine
        s.bind(("127.0.0.1", port))
    return port


def _prepare() -> dict:
    """The bench user (with two groups and 30 threads), its token, and the SQL each route runs."""
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from achilles.services import api_token_create, user_ensure
    from conversations.models import Conversation

    user, _ = user_ensure(username="bench-http")
    for name in ("bench-http-a", "bench-http-b"):
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    missing = 30 - Conversation.objects.filter(user=user).count()
    Conversation.objects.bulk_create(Conversation(user=user, title=f"Тред {n}") for n in range(max(0, missing)))
    token = api_token_create(user=user, name="bench")[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    routes: dict[str, list[str]] = {}
    for route in ROUTES:
        client.get(route)  # the throttled last_used_at write happens here, not in the capture
        with CaptureQueriesContext(connection) as captured:
            response = client.get(route)
        assert response.status_code == 200, (route, response.status_code, response.content[:200])
        routes[route] = [q["sql"] for q in captured.captured_queries]
    params = connection.get_connection_params()
    params = {k: v for k, v in params.items() if k in {"host", "port", "dbname", "user", "password"} and v}
    return {"token": token, "routes": routes, "connection": params}


def _wait_ready(port: int, path: str, token: str, timeout: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"}).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server on {port} did not answer {path}")


def _cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (after the name: fields 14 and 15)
    return total / TICKS


async def _load(ports: list[int], route: str, token: str, clients: int, seconds: float) -> tuple[list[float], int]:
    import httpx

    latencies: list[float] = []
    errors = 0
    stop_at = time.monotonic() + seconds
    sessions = [
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            timeout=30,
            headers={"Authorization": f"Bearer {token}"},
            limits=httpx.Limits(max_connections=clients, max_keepalive_connections=clients),
        )
        for port in ports
    ]

    async def client(n: int) -> None:
        nonlocal errors
        session = sessions[n % len(sessions)]
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            response = await session.get(route)
            latencies.append((time.perf_counter() - started) * 1000)
            errors += response.status_code != 200

    try:
        await asyncio.gather(*(client(n) for n in range(clients)))
    finally:
        for session in sessions:
            await session.aclose()
    return latencies, errors


def _load_process(ports: list[int], route: str, token: str, clients: int, seconds: float) -> dict:
    """The load in a child process (the generator must not share the bench's own interpreter)."""
    code = (
        "import asyncio, json, sys; from bench.http import _load; "
        "a = json.loads(sys.argv[1]); lat, err = asyncio.run(_load(*a)); print(json.dumps([lat, err]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps([ports, route, token, clients, seconds])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    latencies, errors = json.loads(out.strip().splitlines()[-1])
    return {"latencies": latencies, "errors": errors}


def _profile_path(side: str, route: str, clients: int) -> Path:
    return ROOT / "var" / f"bench-http-profile-{side}{route.replace('/', '-')}-{clients}.txt"


def _profiler(pid: int, path: Path) -> subprocess.Popen:
    """py-spy over the measured window, sampling only the thread holding the GIL (Python's own CPU)."""
    command = [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--rate", "200"]
    command += ["--format", "raw", "--gil", "--nonblocking", "--output", str(path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return process


def _start(side: str, port: int, plan_path: str, log) -> subprocess.Popen:
    bin_dir = Path(sys.executable).parent
    if side == "ours":
        command = [str(bin_dir / "daphne"), "-b", "127.0.0.1", "-p", str(port), "achilles.asgi:application"]
    else:
        command = [str(bin_dir / "uvicorn"), "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
        command += ["--no-access-log", "bench._http_peer:app"]
    env = {**os.environ, "BENCH_PEER_PLAN": plan_path}
    return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _measure(side: str, processes: int, plan: dict, plan_path: str) -> list[dict]:
    ports = [_free_port(n) for n in range(processes)]
    logs = [open(ROOT / "var" / f"bench-http-{side}-{n}.log", "w") for n in range(processes)]  # noqa: SIM115
    servers = [_start(side, port, plan_path, log) for port, log in zip(ports, logs, strict=True)]
    rows = []
    try:
        for port in ports:
            _wait_ready(port, ROUTES[0], plan["token"])
        for clients in CLIENTS:
            for route in ROUTES:
                _load_process(ports, route, plan["token"], clients, WARMUP_S)
                profile = _profile_path(side, route, clients)
                profiler = _profiler(servers[0].pid, profile) if PROFILE and processes == PROCESSES[0] else None
                before = _cpu_seconds([s.pid for s in servers])
                load = _load_process(ports, route, plan["token"], clients, DURATION_S)
                cpu = _cpu_seconds([s.pid for s in servers]) - before
                if profiler is not None:
                    profiler.send_signal(signal.SIGINT)
                    profiler.wait(timeout=30)
                latencies = sorted(load["latencies"])
                count = len(latencies)
                rows.append(
                    {
                        "side": side,
                        "processes": processes,
                        "clients": clients,
                        "route": route,
                        "rps": count / DURATION_S,
                        "p50_ms": statistics.median(latencies),
                        "p95_ms": latencies[max(0, int(count * 0.95) - 1)],
                        "cpu_ms_per_request": cpu * 1000 / count,
                        "errors": load["errors"],
                        "profile": str(profile) if profiler is not None else None,
                    }
                )
    finally:
        for server in servers:
            os.killpg(server.pid, signal.SIGTERM)
        for server in servers:
            server.wait(timeout=20)
        for log in logs:
            log.close()
    return rows


def main() -> None:
    run_in_scratch_database(module="bench.http", database=BENCH_DB)


def _child() -> None:
    """In the scratch database (``ACHILLES_DB_NAME``, inherited by both sides' servers)."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    plan = _prepare()
    (ROOT / "var").mkdir(exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=ROOT / "var", delete=False) as f:
        json.dump(plan, f)
        plan_path = f.name
    try:
        rows = []
        for processes in PROCESSES:
            for side in ("ours", "peer"):  # side by side, process count by process count
                rows += _measure(side, processes, plan, plan_path)
    finally:
        os.unlink(plan_path)
    statements = {route: len(plan["routes"][route]) for route in ROUTES}
    print(
        f"server CPU per request, ours (Django on daphne) beside FastAPI + psycopg on uvicorn running the same SQL "
        f"({', '.join(f'{r}: {n} statements' for r, n in statements.items())}); {DURATION_S:.0f} s windows, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'route':<20}{'procs':>6}{'clients':>8}  {'ours ms CPU':>11}{'peer':>8}{'ratio':>7}  "
        f"{'ours req/s':>10}{'peer':>8}  {'ours p95':>9}{'peer':>8}"
    )
    cells = []
    for processes in PROCESSES:
        for clients in CLIENTS:
            for route in ROUTES:
                ours, peer = (
                    next(
                        r
                        for r in rows
                        if (r["side"], r["processes"], r["clients"], r["route"]) == (s, processes, clients, route)
                    )
                    for s in ("ours", "peer")
                )
                ratio = ours["cpu_ms_per_request"] / peer["cpu_ms_per_request"]
                cells.append({"route": route, "processes": processes, "clients": clients, "ratio": ratio})
                print(
                    f"{route:<20}{processes:>6}{clients:>8}  {ours['cpu_ms_per_request']:>11.2f}"
                    f"{peer['cpu_ms_per_request']:>8.2f}{ratio:>6.2f}×  {ours['rps']:>10.0f}{peer['rps']:>8.0f}"
                    f"  {ours['p95_ms']:>9.1f}{peer['p95_ms']:>8.1f}"
                    + (f"  errors {ours['errors']}/{peer['errors']}" if ours["errors"] or peer["errors"] else "")
                )
    if PROFILE:
        from bench._stacks import report

        print("\nwhere each side's CPU per request goes (py-spy, the first web process; bench/_stacks.py)")
        for row in rows:
            if row["profile"] and Path(row["profile"]).exists():
                print(f"{row['side']} {row['route']}, {row['clients']} clients, {row['cpu_ms_per_request']:.2f} ms:")
                print(report(Path(row["profile"]), row["cpu_ms_per_request"]))
    worst = max(c["ratio"] for c in cells)
    print(f"worst CPU ratio ours/peer: {worst:.2f}× (target ≤ {TARGET}×: {'met' if worst <= TARGET else 'NOT met'})")
    result = {
        "bench": "http",
        "seconds": DURATION_S,
        "statements": statements,
        "rows": rows,
        "worst_cpu_ratio": round(worst, 3),
        "target_met": worst <= TARGET,
    }
    print("RESULT " + json.dumps(result, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    _child()
