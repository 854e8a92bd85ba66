"""The floor of bench/http: the CPU of one request at a time through the ASGI application (no
server, no concurrency, no load generator in the process): process CPU time (all threads) per
request for bench/http's two routes, best of three rounds of ``BENCH_INPROC_N`` requests.

    python -m bench._http_inproc                          # in a scratch database of its own
    BENCH_INPROC_PROFILE=1 python -m bench._http_inproc   # + cProfile of the event loop's thread in var/

A diagnostic beside bench/http (not run by ``make bench``): it has no peer.
"""

from __future__ import annotations

import asyncio
import os
import time

from bench._scratch import run_in_scratch_database

N = int(os.environ.get("BENCH_INPROC_N", "2000"))
DATABASE = "achilles_bench_http_inproc"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
    from achilles.bootstrap import bootstrap

    bootstrap()  # the embedded PostgreSQL and Redis, as ``python -m bench`` starts them
    run_in_scratch_database(module="bench._http_inproc", database=DATABASE)


async def _drive(app, path: str, token: str, n: int) -> float:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode())],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    status = []

    def receiver():
        messages = [{"type": "http.request", "body": b"", "more_body": False}]

        async def receive():
            if messages:
                return messages.pop()
            await asyncio.Event().wait()  # the client stays; the handler cancels this when done

        return receive

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    for _ in range(50):
        await app(dict(scope), receiver(), send)
    started = time.process_time()
    for _ in range(n):
        await app(dict(scope), receiver(), send)
    spent = time.process_time() - started
    assert set(status) == {200}, set(status)
    return spent * 1000 / n


def _child() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench.http import _prepare

    plan = _prepare()
    from achilles.asgi import application

    async def run():
        for route in ("/api/me", "/api/conversations"):
            if os.environ.get("BENCH_INPROC_PROFILE"):
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
                await _drive(application, route, plan["token"], N)
                profiler.disable()
                profiler.dump_stats(f"var/inproc{route.replace('/', '-')}.pstats")
            ms = [await _drive(application, route, plan["token"], N) for _ in range(3)]
            print(f"{route:<20} CPU per request {min(ms):.3f} ms (best of 3: {', '.join(f'{m:.3f}' for m in ms)})")

    asyncio.run(run())


if __name__ == "__main__":
    _child() if os.environ.get("ACHILLES_DB_NAME") == DATABASE else main()
