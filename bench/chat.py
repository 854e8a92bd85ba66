"""bench/chat: CPU of the web process per grounding chat turn, platform-added TTFT over SSE, and
disconnect hygiene (issue 15).

The model is a scripted OpenAI-compatible server (its own process; HTTP/1.1 keep-alive, chunked):
a fixed 300 ms time to first token and a steady token rate; a request offering tools gets a
``search_knowledge`` call, the next one the answer (``T<n> …`` questions get n tokens). Ours:
``POST /api/chat`` on daphne (its own process) → round 1 → KS search over the bench/knowledge
corpus (database ``bench_knowledge``, built on first use) → round 2, released sentence by sentence.
The peer: the same two model rounds streamed directly by the same client.

1. CPU of the server per turn (its threads' run time from ``/proc``) over N turns at 1 stream for
   answers of several lengths, after a warm-up that is not counted, the lengths interleaved in rounds
   (``BENCH_CHAT_CPU_ROUNDS``); the median turn of each length → fixed + per-token CPU by least
   squares; then N more turns each with the
   breakdown by phase the server writes while the ``ACHILLES_CHAT_SPANS`` file exists
   (``conversations.spans``; the clock's reads cost CPU too, so the fit is read with it off); the
   same fit at 10 streams.
2. At 1, 10 and 20 streams: our first token (= the first released sentence) against the peer's
   first token and the moment its first sentence is known complete (the added TTFT), server CPU
   per turn and turns per CPU-second, and where the added TTFT goes (from the traces).
   Then turns per CPU-second at 20 streams for 1 and 2 web processes (``BENCH_CHAT_THROUGHPUT_PROCESSES``;
   N: N daphne processes as deployed behind nginx, each warmed up on its own port, the turns spread
   over them, the CPU of each read from ``/proc``; ``BENCH_CHAT_THROUGHPUT_UVICORN=1`` adds uvicorn
   ``--workers N``).
3. 200 streams dropped mid-answer: every upstream generation cancelled, every message finalized
   ``interrupted``, database connections back to baseline within 2 s.

Ends with ``RESULT {"bench": "chat", "cpu_ms_fixed", "cpu_ms_per_token", "added_ttft_p50_ms",
"added_ttft_p95_ms"}`` (1 stream).

    python -m bench chat
    BENCH_KS_CHUNKS=20000 BENCH_CHAT_LEVELS=1 BENCH_CHAT_DISCONNECTS=0 python -m bench chat
    BENCH_CHAT_SERVER_PROCESSES=2 python -m bench chat    # uvicorn with two worker processes
    BENCH_CHAT_PROFILE=1 python -m bench chat             # py-spy over the longest answers
    BENCH_CHAT_PROFILE_GIL=1 …                            # … sampling only the thread holding the GIL
    PORT=8600 …                                           # its servers on PORT+60 … PORT+69
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SENTENCE_WORDS = 12  # the stub's sentences (see STUB_SERVER)
PEER_CONTEXT = (
    "Сотрудник компании получает ежегодный оплачиваемый отпуск продолжительностью двадцать восемь "
    "календарных дней по заявлению в кадровую службу"
)
TTFT_S = 0.300
TOKEN_DELAY_S = float(os.environ.get("BENCH_CHAT_TOKEN_DELAY", "0.02"))  # 50 tokens/s
ANSWER_TOKENS = int(os.environ.get("BENCH_CHAT_TOKENS", "40"))
LEVELS = tuple(int(x) for x in os.environ.get("BENCH_CHAT_LEVELS", "1,10,20").split(","))
REQUESTS = {1: 20, 10: 30, 20: 60}
# Answer lengths (model tokens) of the CPU fit, and turns per length.
LENGTHS = tuple(int(x) for x in os.environ.get("BENCH_CHAT_LENGTHS", "13,40,160").split(","))
CPU_TURNS = int(os.environ.get("BENCH_CHAT_CPU_TURNS", "20"))
# The turns of each length are run in this many rounds, the lengths taking turns within a round, so a
# change in the machine's load over the minutes of the fit falls on every length alike (a fit's slope
# moved by ±0.03 ms per token when all the long answers ran in one block and the short ones in another).
CPU_ROUNDS = int(os.environ.get("BENCH_CHAT_CPU_ROUNDS", "4"))
# Turns per length of the breakdown by phase (the clock on), after the fit's.
CLOCK_TURNS = int(os.environ.get("BENCH_CHAT_CLOCK_TURNS", str(CPU_TURNS)))
# turns per CPU-second at 20 streams, for these numbers of web processes (1: daphne; N: uvicorn --workers N)
THROUGHPUT_PROCESSES = tuple(int(x) for x in os.environ.get("BENCH_CHAT_THROUGHPUT_PROCESSES", "1,2").split(",") if x)
THROUGHPUT_STREAMS = 20
# The pause before each search of the "KS search alone" line's second pass: about one turn at 1 stream.
ALONE_PAUSE_S = float(os.environ.get("BENCH_CHAT_ALONE_PAUSE_S", "1.6"))
# The same fit under concurrent streams (no phase breakdown there: the phases are process-wide).
FIT_STREAMS = tuple(int(x) for x in os.environ.get("BENCH_CHAT_FIT_STREAMS", "10").split(",") if x)
SPANS_FILE = ROOT / "var" / "bench-chat-spans.jsonl"
PROFILE = os.environ.get("BENCH_CHAT_PROFILE") == "1"
PHASES = ("auth", "turn_start", "model", "ks", "gate", "relay", "finalize")
DISCONNECTS = int(os.environ.get("BENCH_CHAT_DISCONNECTS", "200"))
DB_NAME = "bench_knowledge"
# 1: daphne, as supervisord.conf runs the web program; N > 1: uvicorn with N worker processes.
SERVER_PROCESSES = int(os.environ.get("BENCH_CHAT_SERVER_PROCESSES", "1"))
COALESCE_MS = os.environ.get("BENCH_CHAT_COALESCE_MS", "")


# --------------------------------------------------------------------------- the scripted model

STUB_SERVER = r"""
import asyncio, json, re, sys, time
TTFT, DELAY, TOKENS = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, sys.argv[5])
from concurrent.futures import ThreadPoolExecutor
from conversations.support import NEGATORS, check_sentence
CHOOSER = ThreadPoolExecutor(1)  # one thread: the check's stemmers are not thread-safe
stats = {"started": 0, "completed": 0, "aborted": 0}

def chunk(delta, finish=None):
    return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stub",
                                  "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]},
                                 ensure_ascii=False) + "\n\n"

async def handle(reader, writer):
    # HTTP/1.1, keep-alive, chunked: the connection is reused as an OpenAI-compatible server's is.
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            await serve(head, reader, writer)
    except (ConnectionError, asyncio.IncompleteReadError):
        stats["aborted"] += 1
    finally:
        writer.close()

def send(writer, text):
    data = text.encode()
    writer.write(b"%x\r\n%s\r\n" % (len(data), data))

async def serve(head, reader, writer):
    length = 0
    for line in head.decode().split("\r\n"):
        if line.lower().startswith("content-length:"):
            length = int(line.split(":")[1])
    body = json.loads(await reader.readexactly(length)) if length else {}
    if head.startswith(b"GET /stats"):
        data = json.dumps(stats).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        await writer.drain()
        return
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    await writer.drain()
    tools = body.get("tools") or []
    if not tools:
        stats["started"] += 1
    started = time.monotonic()
    # The answer's sentence is chosen within the time to first token (off the event loop: the
    # other streams' tokens go on), so the peer and ours get their first token equally late.
    chosen = None if tools else await asyncio.get_running_loop().run_in_executor(CHOOSER, _source_words, body["messages"])
    await asyncio.sleep(max(0.0, TTFT - (time.monotonic() - started)))
    count = 0
    if tools:
        question = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        args = json.dumps({"query": question}, ensure_ascii=False)
        send(writer, chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                            "function": {"name": "search_knowledge", "arguments": args}}]}))
        send(writer, chunk({}, "tool_calls"))
    else:
        question = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        count = TOKENS * 25 if question.startswith("ДЛИННО") else TOKENS  # a long answer to walk away from
        if question.startswith("T") and question.split(" ", 1)[0][1:].isdigit():  # «T120 …»: that many tokens
            count = int(question.split(" ", 1)[0][1:])
        # A grounded answer: a sentence of a packed source, cited, over and over (one the engine's
        # support check passes), one word per token.
        words, marker = chosen
        pieces = []
        while len(pieces) < count:
            pieces += [w + " " for w in words[:-1]] + [words[-1] + f" [{marker}]. "]
        for i in range(count):
            if i:
                await asyncio.sleep(DELAY)
            send(writer, chunk({"content": pieces[i]}))
            await writer.drain()
        send(writer, chunk({}, "stop"))
        stats["completed"] += 1
        stats["completed_tokens"] = count
    usage = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stub", "choices": [],
             "usage": {"prompt_tokens": 100, "completion_tokens": count, "total_tokens": 100 + count}}
    send(writer, "data: " + json.dumps(usage) + "\n\ndata: [DONE]\n\n")
    writer.write(b"0\r\n\r\n")
    await writer.drain()

def _source_words(messages):
    # (words, marker): the answer's sentence and the packed source it cites
    tool = next((m.get("content") or "" for m in messages if m.get("role") == "tool"), "")
    sources = {}  # marker → text: the lines after a «[N] title» head, up to the blank line
    marker = None
    for line in tool.split("\n"):
        head = re.match(r"\[(\d+)\]", line)
        if head:
            marker = int(head.group(1))
            sources[marker] = []
        elif not line.strip():
            marker = None
        elif marker is not None:
            sources[marker].append(line)
    texts = {m: "\n".join(lines) for m, lines in sources.items()}  # as the engine holds them
    # SENTENCE_WORDS consecutive words of one of a source's sentences (no inner sentence end, so
    # ours and the peer's first sentences are equally long) that the platform's support check
    # passes, as a grounded model's sentence does: a window that drops a «не» of its sentence, say,
    # is refused, and a turn whose sentences are all refused streams nothing (the engine's own
    # answer); a window opening in lower case would run every sentence of the answer into one.
    # Sources in order, sentences without a negation first, and only so many tries per source (the
    # check costs the stub ≈ 0.2 ms a window).
    for marker, body in sorted(texts.items()):
        sentences = re.split(r"(?<=[.!?…])\s+|\n", body)
        sentences.sort(key=lambda sentence: bool(NEGATORS & set(sentence.lower().split())))
        tries = 40
        for sentence in sentences:
            words = [w.strip(".!?…;:") for w in sentence.split()]
            words = [w for w in words if w and not w.startswith("[")]
            for i in range(len(words) - SENTENCE_WORDS + 1):
                tries -= 1
                if tries < 0:
                    break
                window = words[i:i + SENTENCE_WORDS]
                # capitalised: a sentence that opens in lower case does not end the one before it
                window[0] = window[0][:1].upper() + window[0][1:]
                if check_sentence(" ".join(window) + f" [{marker}].", {marker: body}).supported:
                    return window, marker
    words = [w.strip(".!?…;:") for w in texts.get(1, "").split()]
    words = [w for w in words if w and not w.startswith("[")][:SENTENCE_WORDS]
    while words and len(words) < SENTENCE_WORDS:
        words += words[:SENTENCE_WORDS - len(words)]
    if words:
        words[0] = words[0][:1].upper() + words[0][1:]
    return (words or ["Данных", "нет"]), 1

SENTENCE_WORDS = 12

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[4]), backlog=512)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


# PORT (as `make run` takes it): the bench's servers listen on PORT+60 … PORT+69, so several
# checkouts on one machine stay apart; unset, on ports the system picks.
PORT_BASE = int(os.environ.get("PORT", "0") or 0)
_next_port = iter(range(PORT_BASE + 60, PORT_BASE + 70))


def _free_port() -> int:
    if PORT_BASE:
        return next(_next_port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


# --------------------------------------------------------------------------- clients


def _sse_lines(text_buffer: str):
    while "\n\n" in text_buffer:
        block, text_buffer = text_buffer.split("\n\n", 1)
        yield block
    return text_buffer


async def ours_once(client, url: str, token: str, question: str, *, drop_after: int | None = None) -> dict:
    started = time.perf_counter()
    times: list[float] = []
    done = None
    async with client.stream(
        "POST", url, json={"content": question}, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        if response.status_code != 200:
            await response.aread()
            raise RuntimeError(f"chat answered {response.status_code}: {response.text[:200]}")
        buffer = ""
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                if block.startswith("event: token"):
                    times.append(time.perf_counter() - started)
                elif block.startswith("event: done"):
                    done = json.loads(block.split("data: ", 1)[1])
                elif block.startswith("event: error"):
                    raise RuntimeError(block)
            if drop_after is not None and len(times) >= drop_after:
                break
    return {"ttft": times[0] if times else None, "times": times, "done": done}


async def peer_once(client, base: str, question: str) -> dict:
    """The same two rounds, straight to the model: a tool round, then the answer."""
    started = time.perf_counter()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "search_knowledge",
                "description": "search",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
            },
        }
    ]
    messages = [{"role": "system", "content": "grounding"}, {"role": "user", "content": question}]
    async with client.stream(
        "POST", f"{base}/chat/completions", json={"model": "stub", "messages": messages, "tools": tools, "stream": True}
    ) as response:
        async for _ in response.aiter_bytes():
            pass
    messages += [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "search_knowledge", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "[1] context\n" + PEER_CONTEXT},
    ]
    times: list[float] = []
    async with client.stream(
        "POST", f"{base}/chat/completions", json={"model": "stub", "messages": messages, "stream": True}
    ) as response:
        buffer = ""
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                if '"content"' in block:
                    times.append(time.perf_counter() - started)
    # The moment a sentence gate (ours or anyone's) can know the first sentence is complete: the
    # first token of the next one has arrived (a marker may still follow a full stop until then).
    first_sentence = times[min(SENTENCE_WORDS, len(times) - 1)]
    return {"ttft": times[0], "times": times, "first_sentence": first_sentence}


async def run_level(concurrency: int, n: int, make_call) -> list[dict]:
    import httpx

    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        semaphore = asyncio.Semaphore(concurrency)
        results: list[dict] = []

        async def one(i: int):
            async with semaphore:
                results.append(await make_call(client, i))

        await asyncio.gather(*(one(i) for i in range(n)))
    return results


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def gaps(results: list[dict]) -> float:
    out = []
    for r in results:
        t = r["times"]
        out += [b - a for a, b in zip(t, t[1:], strict=False)]
    return statistics.mean(out) if out else float("nan")


# --------------------------------------------------------------------------- main


def _prepare_database(stub_base: str):
    import django

    django.setup()
    from django.db import connection

    from achilles.models import AllowedModel
    from achilles.services import api_token_create, user_ensure

    settings_dict = connection.settings_dict
    settings_dict.setdefault("TEST", {})["NAME"] = DB_NAME
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=True, serialize=False)
    from achilles.llm.builtin import HashEmbeddingProvider
    from bench import knowledge as ks_bench

    AllowedModel.objects.update_or_create(
        name="bench-hash-384",
        defaults={"provider": "hash", "kind": "embedding", "is_default": True, "options": {"dim": 384}},
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('bench_meta') IS NOT NULL")
        fresh = False
        if cursor.fetchone()[0]:
            cursor.execute("SELECT value FROM bench_meta WHERE key = 'dataset'")
            row = cursor.fetchone()
            fresh = bool(row and row[0] == f"{ks_bench.DATASET_VERSION}:{ks_bench.CHUNKS}")
        if not fresh:
            print(f"building the KS dataset ({ks_bench.CHUNKS} chunks, shared with bench/knowledge) …", flush=True)
            ks_bench.build(cursor, HashEmbeddingProvider(dim=384))
        cursor.execute("SELECT count(*) FROM knowledge_chunks")
        chunks = cursor.fetchone()[0]
    AllowedModel.objects.filter(kind="chat", is_default=True).exclude(name="bench-stub").update(is_default=False)
    AllowedModel.objects.update_or_create(
        name="bench-stub",
        defaults={
            "provider": "openai",
            "kind": "chat",
            "is_default": True,
            "context_window": 16000,
            "options": {
                "base_url": stub_base,
                "api_key": "bench",
                "model": "stub",
                "timeout": 60,
                # BENCH_CHAT_COALESCE_MS: the provider's stream_coalesce_ms (unset: its default)
                **({"stream_coalesce_ms": float(COALESCE_MS)} if COALESCE_MS else {}),
            },
        },
    )
    _clear_candidate_cache()
    user, _ = user_ensure(username="bench-chat", groups=["g1", "g2"])
    token = api_token_create(user=user, name="bench-chat")[1]
    return connection, old_name, user, token, chunks


def _search_alone(questions: list[str], user, pause_s: float = 0.0) -> list[float]:
    """Wall ms of ``facade.search`` per question, outside any turn, as the turn's gate calls it;
    ``pause_s`` idle seconds before each (a turn's search comes once per turn, on an idle process:
    back to back the same search is 20–30 % faster, warm CPU caches and no wake-up)."""
    from achilles.platform import platform_settings
    from knowledge import facade
    from knowledge.contracts import Identity

    identity = Identity.for_user(user)
    k = platform_settings().retrieval_top_k
    times = []
    for question in questions:
        if pause_s:
            time.sleep(pause_s)
        started = time.perf_counter()
        facade.search(question, identity, k)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _clear_candidate_cache() -> None:
    """Drop the candidate cache left by earlier runs: every turn measured here must reach KS."""
    from django.core.cache import cache

    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(match="*qe:candidates:*", count=1000))
    if keys:
        client.delete(*keys)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live children (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # the thread ended while we looked
            children.update(int(child) for child in (task / "children").read_text().split())
    for child in children:
        with contextlib.suppress(FileNotFoundError):  # the child ended while we looked
            total += _cpu_seconds(child)
    return total


def _server_command(web_port: int, processes: int, *, uvicorn: bool = False) -> list[str]:
    bin_dir = Path(sys.executable).parent
    if processes > 1 or uvicorn:  # daphne has no multi-process mode; uvicorn shares one socket
        return [
            str(bin_dir / "uvicorn"),
            "--host",
            "127.0.0.1",
            "--port",
            str(web_port),
            "--no-access-log",
            "--workers",
            str(processes),
            "achilles.asgi:application",
        ]
    return [str(bin_dir / "daphne"), "-b", "127.0.0.1", "-p", str(web_port), "achilles.asgi:application"]


def _threads_cpu_ns(pid: int, *, total: bool = False) -> Any:
    """Run time of each thread of a process, ns (``/proc/PID/task/TID/schedstat``'s first field);
    with ``total`` their sum (the threads that ended since are not in it: a server's threads live
    on, asgiref's and the request threads being reused)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            out[int(task.name)] = int((task / "schedstat").read_text().split()[0])
    return sum(out.values()) if total else out


def _profiler(pid: int) -> subprocess.Popen:
    """py-spy (``pip install py-spy``) sampling the server during the longest answers, in the
    collapsed-stack format (``BENCH_CHAT_PROFILE=1``; the profile lands in var/)."""
    out = ROOT / "var" / "bench-chat-profile.txt"
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--rate",
            os.environ.get("BENCH_CHAT_PROFILE_RATE", "250"),
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
            "--subprocesses",
            # only the thread holding the GIL: Python's own CPU, not threads waiting on a socket
            *(["--gil"] if os.environ.get("BENCH_CHAT_PROFILE_GIL") == "1" else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    print(f"  (profiling the server into {out.relative_to(ROOT)})")
    return process


def _read_spans() -> list[dict]:
    """The CPU phases of the turns since the file was emptied (one JSON line per turn)."""
    time.sleep(0.2)  # the last turn's line is written after its final frame
    return [json.loads(line) for line in SPANS_FILE.read_text().splitlines() if line.strip()]


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares ``y = a + b·x`` → (a, b)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - b * mx, b


def _machine_busy_seconds() -> float:
    """CPU time spent by every process of the machine, all cores (Linux /proc/stat)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _db_connections(connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [DB_NAME]
        )
        return cursor.fetchone()[0]


def _throughput_by_processes(env: dict, token: str, qs: list[str], counter) -> dict[str, float]:
    """Turns per CPU-second of the web processes at 20 streams, for each of THROUGHPUT_PROCESSES.

    N web processes are N daphne processes on their own ports, as deployed (nginx spreads the
    requests: deploy/nginx/upstream.conf); the client spreads its turns over them alike. Every
    count starts its servers fresh, and each process is warmed up on its own port before the
    count: the first turns of a process cost many times a warm one (its lazy imports, its pool,
    its caches), and a warm-up through a shared socket (uvicorn ``--workers``) can land on one
    worker only, leaving the other to warm up inside the measurement.
    ``BENCH_CHAT_THROUGHPUT_UVICORN=1`` adds the same count for uvicorn ``--workers N``
    (one socket; its workers' CPU read separately, in the warm-up and in the count)."""
    if not THROUGHPUT_PROCESSES:
        return {}
    turns = 3 * THROUGHPUT_STREAMS
    print(
        f"\n{THROUGHPUT_STREAMS} streams ({turns} turns of {ANSWER_TOKENS} tokens): turns per CPU-second of the web "
        "processes (their threads' run time from /proc; each process warmed up first, on its own port)"
    )
    out: dict[str, float] = {}
    variants = [("daphne", n) for n in THROUGHPUT_PROCESSES]
    if os.environ.get("BENCH_CHAT_THROUGHPUT_UVICORN") == "1":
        variants += [("uvicorn", n) for n in THROUGHPUT_PROCESSES]
    for server, processes in variants:
        started_servers: list[subprocess.Popen] = []
        try:
            if server == "daphne":
                ports = [_free_port() for _ in range(processes)]
                for i, port in enumerate(ports):
                    log = open(ROOT / "var" / f"bench-chat-server-{processes}-{i}.log", "w")  # noqa: SIM115 (the server's log)
                    started_servers.append(
                        subprocess.Popen(
                            _server_command(port, 1), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log
                        )
                    )
            else:
                ports = [_free_port()]
                log = open(ROOT / "var" / f"bench-chat-uvicorn-{processes}.log", "w")  # noqa: SIM115 (the server's log)
                started_servers.append(
                    subprocess.Popen(
                        _server_command(ports[0], processes, uvicorn=True),
                        cwd=ROOT,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=log,
                    )
                )
            for port in ports:
                _wait_port(port)
            if server == "uvicorn":
                _wait_children(started_servers[0].pid, processes)
            urls = [f"http://127.0.0.1:{port}/api/chat" for port in ports]

            def call(client, i, urls=urls):
                return ours_once(client, urls[i % len(urls)], token, qs[next(counter) % len(qs)])

            pids = (
                [p.pid for p in started_servers]
                if server == "daphne"
                else [started_servers[0].pid, *_children(started_servers[0].pid)]
            )

            def cpu_by_pid(pids=pids) -> dict[int, float]:
                return {pid: _threads_cpu_ns(pid, total=True) / 1e9 for pid in pids}

            warm_before = cpu_by_pid()
            for url in urls:  # every process's warm-up on its own port, not counted
                asyncio.run(
                    run_level(
                        4, 8, lambda client, i, url=url: ours_once(client, url, token, qs[next(counter) % len(qs)])
                    )
                )
            if server == "uvicorn":  # one socket: the same warm-up, once per worker
                asyncio.run(run_level(4, 8 * (processes - 1), call))
            before = cpu_by_pid()
            started = time.monotonic()
            asyncio.run(run_level(THROUGHPUT_STREAMS, turns, call))
            wall = time.monotonic() - started
            after = cpu_by_pid()
            cpu_s = sum(after[pid] - before.get(pid, 0.0) for pid in after)
            key = str(processes) if server == "daphne" else f"uvicorn-{processes}"
            out[key] = round(turns / cpu_s, 1)
            split = ", ".join(
                f"{(after[pid] - before.get(pid, 0.0)) * 1000:.0f}"
                + (f" (warm-up {(before[pid] - warm_before.get(pid, 0.0)) * 1000:.0f})" if pid in before else "")
                for pid in after
            )
            print(
                f"  {processes} web process{'es' if processes > 1 else ''} "
                f"({server if server == 'daphne' else 'uvicorn --workers ' + str(processes)}): "
                f"{turns / cpu_s:6.1f} turns per CPU-second ({cpu_s * 1000 / turns:5.1f} ms CPU per turn; "
                f"{turns / wall:5.1f} turns/s wall; load average {os.getloadavg()[0]:.1f}); CPU ms by process: {split}",
                flush=True,
            )
        finally:
            for process in started_servers:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
    return out


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            children += [int(child) for child in (task / "children").read_text().split()]
    return children


def _wait_children(pid: int, count: int, timeout: float = 60) -> None:
    """Until uvicorn's master has its ``count`` workers (plus multiprocessing's helpers, if any)."""
    deadline = time.monotonic() + timeout
    while len(_children(pid)) < count and time.monotonic() < deadline:
        time.sleep(0.2)


def main() -> None:
    import httpx

    stub_port, web_port = _free_port(), _free_port()
    stub = subprocess.Popen(
        [
            sys.executable,
            "-c",
            STUB_SERVER,
            str(TTFT_S),
            str(TOKEN_DELAY_S),
            str(ANSWER_TOKENS),
            str(stub_port),
            str(ROOT),
        ],
        stdout=subprocess.PIPE,
    )
    daphne = None
    connection = old_name = None
    try:
        stub.stdout.readline()
        stub_base = f"http://127.0.0.1:{stub_port}/v1"
        connection, old_name, user, token, chunks = _prepare_database(stub_base)
        from bench.knowledge import queries

        env = {
            **os.environ,
            "ACHILLES_DB_NAME": DB_NAME,
            "DJANGO_SETTINGS_MODULE": "achilles.settings",
            "LOG_LEVEL": "WARNING",
            "ACHILLES_CHAT_SPANS": str(SPANS_FILE),
        }
        server_log = ROOT / "var" / "bench-chat-daphne.log"
        server_log.parent.mkdir(exist_ok=True)
        command = _server_command(web_port, SERVER_PROCESSES)
        daphne = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(server_log, "w"))  # noqa: SIM115 (the server's log, open for its life)
        _wait_port(web_port)
        url = f"http://127.0.0.1:{web_port}/api/chat"
        qs = queries(2000)
        counter = iter(range(10**9))

        asked: list[str] = []

        def ours(client, i, prefix="", **kw):
            # A fresh question each time: the candidate cache never answers for KS here.
            asked.append(prefix + qs[next(counter) % len(qs)])
            return ours_once(client, url, token, asked[-1], **kw)

        def peer(client, i):
            return peer_once(client, stub_base, qs[i % len(qs)])

        print(
            f"model: TTFT {TTFT_S * 1000:.0f} ms per round, {1 / TOKEN_DELAY_S:.0f} tokens/s, "
            f"{ANSWER_TOKENS} answer tokens; KS: {chunks} chunks; server: "
            + (f"uvicorn, {SERVER_PROCESSES} processes " if SERVER_PROCESSES > 1 else "daphne, 1 process ")
            + f"(log: {server_log.relative_to(ROOT)})\n"
        )
        SPANS_FILE.unlink(missing_ok=True)  # the phase clock off but where the breakdown is read
        # warm-up: imports, pool, HNSW pages — of every worker process
        asyncio.run(run_level(4, 8 * SERVER_PROCESSES, ours))
        asyncio.run(run_level(4, 4, peer))

        from conversations.models import RetrievalTrace

        # ---- 1 stream: CPU of the web process per turn, by answer length → fixed + per token
        print(
            f"CPU of the web process per grounding turn (1 stream, the median of {CPU_TURNS} turns per answer "
            f"length in {CPU_ROUNDS} interleaved rounds after an uncounted warm-up; each turn's run time of the "
            "server's threads from /proc/PID/task/*/schedstat)"
        )
        print(
            f"{'tokens':>7} {'CPU/turn':>9}  "
            + " ".join(f"{p:>10}" for p in (*PHASES, "outside"))
            + f"  {'CPU/turn, clock on':>9}"
        )

        def turns_cpu_ms(length: int, turns: int) -> list[float]:
            """CPU ms of the web process in each of ``turns`` sequential turns of ``length`` tokens
            (its threads' run time from /proc, to the nanosecond)."""
            out = []
            for _ in range(turns):
                before = _threads_cpu_ns(daphne.pid)
                asyncio.run(run_level(1, 1, lambda client, i: ours(client, i, prefix=f"T{length} ")))
                after = _threads_cpu_ns(daphne.pid)
                out.append(sum(ns - before.get(tid, 0) for tid, ns in after.items()) / 1e6)
            return out

        # Warm-up of every length, not counted (the first long answers of a process cost more).
        for length in LENGTHS:
            turns_cpu_ms(length, 2)
        # The CPU per turn, with the phase clock off (its own clock reads cost CPU too: the server
        # measures a turn only while the spans file exists), the lengths interleaved round by round;
        # per length the median turn, which a burst of the machine's other work does not move.
        SPANS_FILE.unlink(missing_ok=True)
        rounds = max(1, min(CPU_ROUNDS, CPU_TURNS))
        per_length: dict[int, list[float]] = {length: [] for length in LENGTHS}
        profiler = _profiler(daphne.pid) if PROFILE else None
        for n in range(rounds):
            for length in LENGTHS if n % 2 == 0 else tuple(reversed(LENGTHS)):
                per_length[length] += turns_cpu_ms(length, CPU_TURNS // rounds + (1 if n < CPU_TURNS % rounds else 0))
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(timeout=30)
        cpu_rows = []
        for length in LENGTHS:
            per_turn = statistics.median(per_length[length])
            # the same turns again with the clock on, for the breakdown by phase
            SPANS_FILE.write_text("")
            clock_on = statistics.mean(turns_cpu_ms(length, CLOCK_TURNS))
            spans = _read_spans()
            SPANS_FILE.unlink(missing_ok=True)
            phases = {
                p: statistics.mean(row["cpu_ms"].get(p, 0.0) for row in spans) if spans else float("nan")
                for p in PHASES
            }
            outside = clock_on - sum(phases.values())
            cpu_rows.append((length, per_turn, phases))
            print(
                f"{length:>7} {per_turn:>7.1f}ms  "
                + " ".join(f"{phases[p]:>8.2f}ms" for p in PHASES)
                + f" {outside:>8.2f}ms  {clock_on:>7.1f}ms"
                + f"   (turns: mean {statistics.mean(per_length[length]):.1f}, "
                f"p10–p90 {pct(per_length[length], 0.1):.1f}–{pct(per_length[length], 0.9):.1f} ms)",
                flush=True,
            )
        fixed, per_token = _fit([(length, cpu) for length, cpu, _ in cpu_rows])
        gate_fixed, gate_per_token = _fit([(length, ph["gate"]) for length, _, ph in cpu_rows])
        print(
            f"  fit: CPU per turn = {fixed:.1f} ms fixed + {per_token:.3f} ms per streamed token "
            f"(targets: ≤ 25 ms, ≤ 0.1 ms); the support check: {gate_fixed:.2f} ms + {gate_per_token:.4f} ms per token"
        )
        print(
            "  phases: auth (view: body; the credentials are checked in the start's step) | turn_start (credentials, "
            "CSRF, thread, user message, history, settings, is_empty, prompt) | model (both rounds: request, stream parsing) | ks (cache gate, KS search, "
            "packing, hint) | gate (sentence support check) | relay (events → SSE frames → daphne) | "
            "finalize (message, trace, citations, access signals) | outside (daphne/ASGI work outside the view)"
        )
        for streams in FIT_STREAMS:
            # The same fit with concurrent streams: one event-loop wake-up then serves several
            # streams' tokens, so the per-token cost of a loaded process is lower than at 1 stream.
            points = []
            for length in LENGTHS:
                turns = 3 * streams
                before = _cpu_seconds(daphne.pid)
                asyncio.run(
                    run_level(streams, turns, lambda client, i, length=length: ours(client, i, prefix=f"T{length} "))
                )
                points.append((length, (_cpu_seconds(daphne.pid) - before) * 1000 / turns))
            f_fixed, f_per_token = _fit(points)
            print(
                f"  at {streams} streams: CPU per turn "
                + ", ".join(f"{cpu:.1f} ms ({n} tokens)" for n, cpu in points)
                + f" → {f_fixed:.1f} ms fixed + {f_per_token:.3f} ms per token",
                flush=True,
            )
        print()

        header = (
            f"{'streams':>7} {'ours TTFT p50':>13} {'p95':>7} {'peer TTFT p50':>13} {'p95':>7} "
            f"{'added p50':>9} {'added p95':>9} {'ours gap':>8} {'peer gap':>8} {'+/token':>8} "
            f"{'server CPU/turn':>15} {'turns/CPU-s':>11} {'machine CPU/turn':>16}"
        )
        print(
            f"TTFT ({ANSWER_TOKENS}-token answers). Ours: the first token event, which on a grounding turn is "
            "the first released (checked) sentence; peer: the model's first token. 'added' sets ours against "
            "the moment the peer's first sentence is known complete (its next token arrived): the platform's "
            "own delay, the sentence wait being the same for anyone who checks sentences."
        )
        print(header)
        breakdown = []
        first_sentences = []
        added_one = (float("nan"), float("nan"))
        for level in LEVELS:
            n = REQUESTS.get(level, 3 * level)
            last_trace = RetrievalTrace.objects.order_by("-id").values_list("id", flat=True).first() or 0
            cpu_before, busy_before = _cpu_seconds(daphne.pid), _machine_busy_seconds()
            asked.clear()
            mine = asyncio.run(run_level(level, n, ours))
            cpu_s = _cpu_seconds(daphne.pid) - cpu_before
            cpu_per_turn = cpu_s * 1000 / n
            machine_per_turn = (_machine_busy_seconds() - busy_before) * 1000 / n
            timings = list(RetrievalTrace.objects.filter(id__gt=last_trace).values_list("timings", flat=True))
            # The same KS search called alone (this process, same questions, identity and top-K, right
            # after the turns): what the turn adds around `facade.search` is the difference.
            # Once untimed first: this process's first searches fill its own caches (word counts,
            # planner verdicts) that the server's have filled over the turns.
            alone: tuple[list[float], list[float]] | tuple[()] = ()
            if level == 1:
                _search_alone(list(asked), user)
                alone = (_search_alone(list(asked), user), _search_alone(list(asked), user, ALONE_PAUSE_S))
            breakdown.append((level, timings, alone))
            theirs = asyncio.run(run_level(level, n, peer))
            a = [r["ttft"] * 1000 for r in mine]
            b = [r["ttft"] * 1000 for r in theirs]
            c = [r["first_sentence"] * 1000 for r in theirs]
            ga, gb = gaps(mine) * 1000, gaps(theirs) * 1000
            added50, added95 = pct(a, 0.5) - pct(c, 0.5), pct(a, 0.95) - pct(c, 0.95)
            if level == 1:
                added_one = (added50, added95)
            first_sentences.append(
                (level, pct(a, 0.5), pct(a, 0.95), pct(b, 0.5), pct(b, 0.95), pct(c, 0.5), pct(c, 0.95))
            )
            print(
                f"{level:>7} {pct(a, 0.5):>11.0f}ms {pct(a, 0.95):>5.0f}ms {pct(b, 0.5):>11.0f}ms {pct(b, 0.95):>5.0f}ms "
                f"{added50:>7.0f}ms {added95:>7.0f}ms "
                f"{ga:>6.1f}ms {gb:>6.1f}ms {ga - gb:>6.2f}ms {cpu_per_turn:>13.1f}ms {n / cpu_s:>11.1f} "
                f"{machine_per_turn:>14.1f}ms",
                flush=True,
            )

        print(
            "\ntime to the first released sentence (ours: the first token event, after the support check) "
            "vs the model's first token and first complete sentence (peer)"
        )
        for level, ours50, ours95, tok50, tok95, sen50, sen95 in first_sentences:
            print(
                f"{level:>7} streams: ours first sentence p50 {ours50:6.0f} ms p95 {ours95:6.0f} ms | peer first token "
                f"p50 {tok50:6.0f} ms p95 {tok95:6.0f} ms | peer first sentence p50 {sen50:6.0f} ms p95 {sen95:6.0f} ms"
            )
        print(
            "\nwhere our added TTFT goes (wall, p50 per turn, from the retrieval traces): before round 1 | "
            "round 1 provider overhead beyond the model's TTFT | cache gate + KS search | round 2 provider overhead"
        )
        for level, timings, alone in breakdown:

            def p50(key, minus=0.0, timings=timings):
                values = [t[key] - minus for t in timings if t.get(key) is not None]
                return pct(values, 0.5) if values else float("nan")

            ttft_ms = TTFT_S * 1000
            print(
                f"{level:>7} streams: prepare {p50('prepare_ms'):6.1f} ms | round 1 +{p50('round1_first_event_ms', ttft_ms):6.1f} ms"
                f" | KS {p50('tools_ms'):6.1f} ms | round 2 +{p50('round2_first_token_ms', ttft_ms):6.1f} ms"
                f" | support check per answer {p50('gate_ms'):5.2f} ms"
            )
            if alone:
                tight, paced = alone
                print(
                    f"{'':>7}          KS search alone, same {len(tight)} questions and identity: back to back "
                    f"p50 {pct(tight, 0.5):5.1f} ms p95 {pct(tight, 0.95):5.1f} ms; {ALONE_PAUSE_S:g} s apart as in "
                    f"the turns p50 {pct(paced, 0.5):5.1f} ms p95 {pct(paced, 0.95):5.1f} ms "
                    f"(load average {os.getloadavg()[0]:.1f})"
                )
        throughput = _throughput_by_processes(env, token, qs, counter)
        result = {
            "bench": "chat",
            "cpu_ms_fixed": round(fixed, 2),
            "cpu_ms_per_token": round(per_token, 4),
            "added_ttft_p50_ms": round(added_one[0], 1),
            "added_ttft_p95_ms": round(added_one[1], 1),
            "server_processes": SERVER_PROCESSES,
            "turns_per_cpu_s_20_streams": throughput,
        }

        # ---- 200 mid-stream disconnects
        if not DISCONNECTS:
            print("RESULT " + json.dumps(result))
            return
        from conversations.models import Message

        time.sleep(1.0)
        baseline = _db_connections(connection)
        before_stats = httpx.get(f"http://127.0.0.1:{stub_port}/stats").json()
        before_ids = set(Message.objects.filter(role="assistant").values_list("id", flat=True))
        dropped_at = time.monotonic()
        asyncio.run(run_level(20, DISCONNECTS, lambda client, i: ours(client, i, prefix="ДЛИННО ", drop_after=2)))
        dropped_at = time.monotonic()
        back_after = None
        while time.monotonic() - dropped_at < 10:
            now = _db_connections(connection)
            if now <= baseline:
                back_after = time.monotonic() - dropped_at
                break
            time.sleep(0.05)
        time.sleep(max(0.0, 2.0 - (time.monotonic() - dropped_at)))
        new = Message.objects.filter(role="assistant").exclude(id__in=before_ids)
        states = {s: new.filter(state=s).count() for s in ("interrupted", "complete", "failed")}
        # an upstream stream that went on to its end would have been "completed"
        deadline = time.monotonic() + ANSWER_TOKENS * 25 * TOKEN_DELAY_S + 2
        while time.monotonic() < deadline:
            after_stats = httpx.get(f"http://127.0.0.1:{stub_port}/stats").json()
            if after_stats["started"] - before_stats["started"] == (
                after_stats["aborted"] - before_stats["aborted"]
            ) + (after_stats["completed"] - before_stats["completed"]):
                break
            time.sleep(0.2)
        started = after_stats["started"] - before_stats["started"]
        completed = after_stats["completed"] - before_stats["completed"]
        aborted = after_stats["aborted"] - before_stats["aborted"]
        print(
            f"\n{DISCONNECTS} mid-stream disconnects (answers of {ANSWER_TOKENS * 25} tokens, dropped after 2, "
            "20 at a time):"
        )
        print(f"  upstream generations started {started}, cancelled {aborted}, ran to the end {completed}")
        print(
            f"  assistant messages: {new.count()} written — {states['interrupted']} interrupted, "
            f"{states['complete']} complete, {states['failed']} failed"
        )
        half_written = new.filter(content="").count()
        print(f"  empty/half-written rows: {half_written}")
        print(
            f"  DB connections: baseline {baseline}, now {_db_connections(connection)}, "
            + (
                f"back to baseline {back_after * 1000:.0f} ms after the last drop"
                if back_after is not None
                else "NOT back to baseline within 10 s"
            )
        )
        print("RESULT " + json.dumps(result))
    finally:
        for process in (daphne, stub):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        if connection is not None and old_name is not None:
            connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=True)


if __name__ == "__main__":
    main()
