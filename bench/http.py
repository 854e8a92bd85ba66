"""Authenticated JSON endpoint (`GET /api/me` with a Bearer token) on daphne vs uvicorn.

Both servers serve the same ASGI application (achilles.asgi.application) against the same
database; the load generator is an asyncio httpx client with fixed concurrency, run in
another process so it does not share the server's event loop. Prints requests/s and
p50/p95 latency side by side, with the ratio. It informs the production server choice.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DURATION_S = float(os.environ.get("BENCH_HTTP_SECONDS", "8"))
CONCURRENCY = int(os.environ.get("BENCH_HTTP_CONCURRENCY", "16"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _token() -> str:
    import django

    django.setup()
    from achilles.services import api_token_create, user_ensure

    user, _ = user_ensure(username="bench-http")
    return api_token_create(user=user, name="bench")[1]


def _wait_ready(port: int, timeout: float = 30) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code in (200, 503):
                return
        except Exception:
            time.sleep(0.2)
    raise RuntimeError(f"server on {port} did not come up")


async def _load(port: int, token: str) -> tuple[int, list[float], int]:
    import httpx

    latencies: list[float] = []
    errors = 0
    stop_at = time.monotonic() + DURATION_S
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=10, headers={"Authorization": f"Bearer {token}"}
    ) as client:

        async def worker():
            nonlocal errors
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                response = await client.get("/api/me")
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    errors += 1
                    if errors == 1:
                        print(f"  first error: {response.status_code} {response.text[:200]}")

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return len(latencies), latencies, errors


def _measure(name: str, command: list[str], port: int, token: str) -> dict:
    log = open(ROOT / "var" / f"bench-http-{name}.log", "w")  # noqa: SIM115 (the server's log, open for its life)
    proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_ready(port)
        asyncio.run(_load(port, token))  # warm-up pass is the same length as the measured one
        count, latencies, errors = asyncio.run(_load(port, token))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    latencies.sort()
    return {
        "server": name,
        "rps": count / DURATION_S,
        "p50": statistics.median(latencies),
        "p95": latencies[int(len(latencies) * 0.95) - 1],
        "errors": errors,
    }


def main() -> None:
    token = _token()
    bin_dir = Path(sys.executable).parent
    results = []
    port = _free_port()
    results.append(
        _measure(
            "daphne",
            [str(bin_dir / "daphne"), "-b", "127.0.0.1", "-p", str(port), "achilles.asgi:application"],
            port,
            token,
        )
    )
    port = _free_port()
    results.append(
        _measure(
            "uvicorn",
            [
                str(bin_dir / "uvicorn"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
                "achilles.asgi:application",
            ],
            port,
            token,
        )
    )
    print(f"GET /api/me (Bearer), {CONCURRENCY} concurrent clients, {DURATION_S:.0f}s per server after warm-up")
    print(f"{'server':<10}{'req/s':>10}{'p50 ms':>10}{'p95 ms':>10}{'errors':>8}")
    for r in results:
        print(f"{r['server']:<10}{r['rps']:>10.1f}{r['p50']:>10.1f}{r['p95']:>10.1f}{r['errors']:>8}")
    daphne, uvicorn = results
    print(
        f"ratio uvicorn/daphne: throughput {uvicorn['rps'] / daphne['rps']:.2f}x, "
        f"p95 {uvicorn['p95'] / daphne['p95']:.2f}x"
    )


if __name__ == "__main__":
    main()
