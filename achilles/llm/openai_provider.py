"""Providers for any OpenAI-compatible endpoint (PLAT-6): the chat stream over aiohttp (see
"the chat stream's transport" below), embeddings on the official ``openai`` SDK.

Options read from ``ModelSpec.options``: ``base_url``; ``api_key`` or ``api_key_env`` (the name
of the environment variable holding it; local servers need neither); ``model`` (provider's model
id, default ``spec.name``); ``timeout`` / ``idle_timeout`` / ``first_token_timeout`` (seconds);
``max_retries`` (default 0); ``temperature``; ``max_tokens_param`` (``max_tokens`` or
``max_completion_tokens``); ``stream_usage`` (default true: ask for usage in the stream);
``stream_coalesce_ms`` (default 250; 0: off — after the first sentence, how long mid-sentence tokens
may gather before they are read, see ``DEFAULT_COALESCE_MS``); embeddings also ``dimensions`` and
``batch_size`` (default 64).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import re
import ssl
import threading
import time
import urllib.parse
import urllib.request
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import openai

from achilles.llm.base import (
    KEEPALIVE,
    LLM_BAD_RESPONSE,
    LLM_TIMEOUT,
    LLM_UNAVAILABLE,
    LLMError,
    Timeouts,
    estimate_input_tokens,
    estimate_output_tokens,
    guard_stream,
)
from achilles.llm.types import (
    Message,
    ModelSpec,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCalls,
    ToolSpec,
    Usage,
)

# Local servers (vLLM, Ollama, llama.cpp) ignore the key, but the SDK insists on one.
NO_KEY = "not-needed"


def resolve_api_key(spec: ModelSpec) -> str:
    options = spec.options
    if options.get("api_key"):
        return str(options["api_key"])
    env_name = options.get("api_key_env")
    if not env_name:
        return NO_KEY
    key = os.environ.get(str(env_name), "")
    if not key:
        raise LLMError(
            f"model {spec.name!r}: environment variable {env_name} holding its API key is not set",
            code=LLM_UNAVAILABLE,
        )
    return key


def map_openai_error(error: Exception, model: str) -> LLMError:
    """One ``LLMError`` per SDK failure; the upstream message is trimmed, never the key."""
    if isinstance(error, LLMError):
        return error
    if isinstance(error, openai.APITimeoutError):
        return LLMError(f"model {model!r} timed out", code=LLM_TIMEOUT)
    if isinstance(error, openai.APIConnectionError):
        return LLMError(f"model {model!r} is unreachable: {error}", code=LLM_UNAVAILABLE)
    if isinstance(error, openai.APIStatusError):
        message = _upstream_message(error)
        return LLMError(
            f"model {model!r} provider answered HTTP {error.status_code}: {message}",
            code=LLM_UNAVAILABLE,
            extra={"provider_status": error.status_code},
        )
    if isinstance(error, openai.APIResponseValidationError | json.JSONDecodeError | ValueError):
        return LLMError(f"model {model!r} sent a malformed response: {error}", code=LLM_BAD_RESPONSE)
    if isinstance(error, openai.APIError):  # an error event inside the stream
        return LLMError(f"model {model!r} failed mid-stream: {error.message}", code=LLM_UNAVAILABLE)
    return LLMError(f"model {model!r} failed: {error!r}", code=LLM_UNAVAILABLE)


def _upstream_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
    else:
        message = body or error.message
    return str(message)[:300]


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            converted.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            converted.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {
                                "name": c.name,
                                "arguments": json.dumps(c.arguments, ensure_ascii=False),
                            },
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            converted.append({"role": m.role, "content": m.content})
    return converted


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            },
        }
        for t in tools
    ]


@dataclass
class _CallSlot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAssembler:
    """Joins streamed tool-call fragments by their ``index`` into whole ``ToolCall``s."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.slots: dict[int, _CallSlot] = {}

    def add(self, fragment: dict) -> None:
        """One ``delta.tool_calls[i]`` object of a stream chunk, as decoded JSON."""
        if not isinstance(fragment, dict):
            raise LLMError(f"model {self.model!r} sent a malformed tool call fragment", code=LLM_BAD_RESPONSE)
        slot = self.slots.setdefault(fragment.get("index") or 0, _CallSlot())
        if fragment.get("id"):
            slot.id = str(fragment["id"])
        function = fragment.get("function")
        if isinstance(function, dict):
            # Most servers send the name once; some repeat it whole in every fragment.
            name, arguments = function.get("name"), function.get("arguments")
            if name and name != slot.name:
                slot.name += str(name)
            if arguments:
                slot.arguments.append(str(arguments))

    def calls(self) -> tuple[ToolCall, ...]:
        calls = []
        for index in sorted(self.slots):
            slot = self.slots[index]
            if not slot.name:
                raise LLMError(
                    f"model {self.model!r} sent a tool call without a name",
                    code=LLM_BAD_RESPONSE,
                )
            raw = "".join(slot.arguments).strip() or "{}"
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError as error:
                raise LLMError(
                    f"model {self.model!r} sent invalid JSON arguments for tool {slot.name!r}: "
                    f"{error.msg} in {raw[:200]!r}",
                    code=LLM_BAD_RESPONSE,
                ) from error
            if not isinstance(arguments, dict):
                raise LLMError(
                    f"model {self.model!r} sent non-object arguments for tool {slot.name!r}",
                    code=LLM_BAD_RESPONSE,
                )
            calls.append(ToolCall(id=slot.id or f"call_{index}", name=slot.name, arguments=arguments))
        return tuple(calls)


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The ``data`` of each Server-Sent Event (multi-line data joined by newlines, comments and
    other fields skipped), as the SSE specification splits a stream."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


# The end of one Server-Sent Event: a blank line, whichever line ending the server uses.
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


async def sse_payloads(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """``sse_data`` straight from the body's bytes: the stream is cut into events and only a
    whole event is decoded, instead of decoding text and splitting lines chunk by chunk (that
    stack cost more CPU per streamed token than everything else a turn does per token)."""
    async for batch in sse_batches(chunks):
        for data in batch:
            yield data


async def sse_batches(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[str]]:
    """``sse_payloads`` by read: the events each read of the body completes, in one list (none
    when a read completes no event). A consumer handles what arrived together at once, instead of
    passing each token through every layer above it on its own."""
    buffer = b""
    async for chunk in chunks:
        # Only the tail that may complete a separator is searched again.
        searched_from = max(0, len(buffer) - 3)
        buffer += chunk
        batch: list[str] = []
        while (end := _EVENT_END.search(buffer, searched_from)) is not None:
            data = _event_data(buffer[: end.start()])
            buffer = buffer[end.end() :]
            searched_from = 0
            if data is not None:
                batch.append(data)
        if batch:
            yield batch
    if buffer.strip():
        data = _event_data(buffer)
        if data is not None:
            yield [data]


def _event_data(block: bytes) -> str | None:
    data: list[str] = []
    for raw in block.splitlines():  # bytes: only \n, \r and \r\n end a line
        if not raw or raw.startswith(b":"):
            continue
        name, _, value = raw.partition(b":")
        if name == b"data":
            data.append((value[1:] if value.startswith(b" ") else value).decode("utf-8"))
    return "\n".join(data) if data else None


# Tokens in the middle of a sentence are read in batches, once the first sentence is out: every
# separate read is an event-loop wake-up — on a loaded 2-core machine 0.15–0.3 ms of CPU, more
# than all the parsing of a token (bench/chat) — and no reader needs them one by one: the support
# check releases whole sentences, round 1's text is held until the round ends, and a person
# reading a plain stream does not see a tenth of a second. Until a sentence may have ended, and
# right after any token that may end one (or anything but text: tool calls, the end), the next
# bytes are read at once: the first sentence is never held, and a later one at most this long.
DEFAULT_COALESCE_MS = 250.0
_MID_SENTENCE_END = re.compile(r"[\w,\-–—]\s*\Z")


class _ReadPace:
    """How long to let the next bytes gather before reading them (0: read as they come)."""

    __slots__ = ("hold", "sentence_seen")

    def __init__(self) -> None:
        self.hold = 0.0
        self.sentence_seen = False

    def after(self, text: str, coalesce: float) -> None:
        """Set the pace after an event whose text is ``text`` ("" for anything but text)."""
        if not text:
            self.hold = 0.0
        elif _MID_SENTENCE_END.search(text) is None:  # a sentence may end here
            self.hold = 0.0
            self.sentence_seen = True
        else:
            self.hold = coalesce if self.sentence_seen else 0.0


async def _paced_reads(response: aiohttp.ClientResponse, pace: _ReadPace) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive; while ``pace.hold`` is set, the socket is not read for
    that long first (the transport is paused, so the event loop does not wake per packet), and
    what gathered meanwhile comes in one read."""
    content = response.content
    while True:
        connection = response.connection  # None once the body has ended
        protocol = connection.protocol if connection is not None else None
        # (a protocol with nothing buffered is falsy; one whose connection was lost has no transport)
        if pace.hold > 0 and protocol is not None and protocol.transport is not None:
            protocol.pause_reading()
            try:
                await asyncio.sleep(pace.hold)
            finally:
                protocol.resume_reading()
        chunk = await content.readany()
        if not chunk:
            return
        yield chunk


def _error_text(error: Any) -> str:
    message = error.get("message", error) if isinstance(error, dict) else error
    return str(message)[:300]


_SSL_CONTEXT: ssl.SSLContext | None = None


def _ssl_context() -> ssl.SSLContext:
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        # The SDK's own default (system trust store, SSL_CERT_FILE / SSL_CERT_DIR honoured, so a
        # corporate CA keeps working), built once instead of once per client.
        import httpx2

        _SSL_CONTEXT = httpx2.create_ssl_context()
    return _SSL_CONTEXT


# --- the chat stream's transport ----------------------------------------------------------------
#
# The chat stream goes over aiohttp, not the SDK's httpx: its C HTTP parser and protocol-level
# reads cost ≈ 40 % less CPU per streamed token than httpx/httpcore/anyio, and building the request
# without the SDK's request transform saves ≈ 2 ms per call (bench/chat). What the SDK did for
# the call is kept here: the Bearer key and OpenAI's organization/project headers, its default
# base URL, retries (``max_retries``, default 0) on the same statuses with the same backoff,
# HTTP errors carrying the upstream's message, the system trust store, proxies from the
# environment, redirects followed. Embeddings stay on the SDK (sync, once per search).

DEFAULT_BASE_URL = "https://api.openai.com/v1"
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER_DELAY = 120.0
# Idle connections are dropped after this long (httpx's default, which the SDK used): shorter
# than most providers' own keep-alive, so a pooled connection is rarely one the server closed.
KEEPALIVE_SECONDS = 5.0


class UpstreamStatusError(Exception):
    """The provider answered the chat request with an HTTP error status."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"Error code: {status} - {body}")
        self.status = status
        self.body = body


class _ChatEndpoint:
    """One provider endpoint on one event loop: its aiohttp session (connection pool) and the
    request's fixed parts."""

    def __init__(self, spec: ModelSpec, timeout: float) -> None:
        options = spec.options
        base_url = str(options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.max_retries = int(options.get("max_retries", 0))
        self.headers = {
            "Authorization": f"Bearer {resolve_api_key(spec)}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        for header, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            if os.environ.get(variable):
                self.headers[header] = os.environ[variable]
        # The proxy from the environment (HTTPS_PROXY, NO_PROXY …), looked up once: aiohttp's
        # trust_env looks it up, and reads ~/.netrc, on every request.
        host = urllib.parse.urlsplit(self.url).hostname or ""
        proxies = urllib.request.getproxies_environment()
        bypass = not host or urllib.request.proxy_bypass_environment(host, proxies)
        self.proxy = None if bypass else proxies.get(urllib.parse.urlsplit(self.url).scheme)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1000, ssl=_ssl_context(), keepalive_timeout=KEEPALIVE_SECONDS),
            # Connecting is bounded here; the total, first-chunk and idle deadlines are
            # guard_stream's (the stream's own timer).
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout),
        )

    async def post(self, body: bytes) -> Any:
        """The streaming response (status 200), after retries; raises on anything else."""
        attempt = 0
        while True:
            response = None
            try:
                response = await self.session.post(self.url, data=body, headers=self.headers, proxy=self.proxy)
                if response.status < 400:
                    return response
                text = await response.text(errors="replace")
                response.release()
                retry = self.max_retries > attempt and _should_retry(response.status, response.headers)
                if not retry:
                    raise UpstreamStatusError(response.status, _error_body(text))
                delay = _retry_delay(attempt, response.headers)
            except (aiohttp.ClientConnectionError, TimeoutError):
                if response is not None:
                    response.close()
                if self.max_retries <= attempt:
                    raise
                delay = _retry_delay(attempt, None)
            attempt += 1
            await asyncio.sleep(delay)


def _error_body(text: str) -> Any:
    """As the SDK keeps it: the JSON's ``error`` object when there is one, else the JSON, else
    the text."""
    text = text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text
    return body.get("error", body) if isinstance(body, dict) else body


def _retry_after(headers: Any) -> float | None:
    for header, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue
    try:
        date = email.utils.parsedate_tz(headers.get("retry-after"))
        return None if date is None else float(email.utils.mktime_tz(date) - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _should_retry(status: int, headers: Any) -> bool:
    retry_after = _retry_after(headers)
    if retry_after is not None and math.isfinite(retry_after) and retry_after > MAX_RETRY_AFTER_DELAY:
        return False
    explicit = headers.get("x-should-retry")
    if explicit in ("true", "false"):
        return explicit == "true"
    return status in (408, 409, 429) or status >= 500


def _retry_delay(attempt: int, headers: Any) -> float:
    retry_after = _retry_after(headers) if headers is not None else None
    if retry_after is not None and math.isfinite(retry_after) and 0 < retry_after <= MAX_RETRY_AFTER_DELAY:
        return retry_after
    return min(INITIAL_RETRY_DELAY * 2.0**attempt, MAX_RETRY_DELAY) * (1 - 0.25 * random.random())


def map_chat_error(error: Exception, model: str) -> LLMError:
    """``map_openai_error`` for the chat stream's transport: one ``LLMError`` per failure."""
    if isinstance(error, UpstreamStatusError):
        return LLMError(
            f"model {model!r} provider answered HTTP {error.status}: {_status_message(error.body, str(error))}",
            code=LLM_UNAVAILABLE,
            extra={"provider_status": error.status},
        )
    if isinstance(error, TimeoutError):
        return LLMError(f"model {model!r} timed out", code=LLM_TIMEOUT)
    if isinstance(error, aiohttp.ClientPayloadError):  # the body broke off or was not valid HTTP
        return LLMError(f"model {model!r} failed mid-stream: {error}", code=LLM_UNAVAILABLE)
    if isinstance(error, aiohttp.ClientError):
        return LLMError(f"model {model!r} is unreachable: {error}", code=LLM_UNAVAILABLE)
    return map_openai_error(error, model)


def _status_message(body: Any, fallback: str) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
    else:
        message = body or fallback
    return str(message)[:300]


# One endpoint per event loop and provider endpoint: a connection pool is bound to the loop that
# opened it (daphne has one loop per process; an agent run or a Celery task has its own). Reusing
# it keeps TCP/TLS connections alive and builds no SSL context per call (≈ 50 ms of CPU).
class _LoopEndpoints(dict):
    """The endpoints of one event loop, and what closes their sessions when the loop ends."""

    closer: AsyncIterator[None]


_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopEndpoints] = weakref.WeakKeyDictionary()


def _chat_endpoint(spec: ModelSpec, timeout: float) -> _ChatEndpoint:
    loop = asyncio.get_running_loop()
    options = spec.options
    key = (options.get("base_url"), resolve_api_key(spec), timeout, int(options.get("max_retries", 0)))
    per_loop = _CLIENTS.get(loop)
    if per_loop is None:
        per_loop = _CLIENTS[loop] = _LoopEndpoints()
        # Started once, the closer stays suspended among the loop's live async generators, which
        # asyncio.run and asyncio.Runner close before they close the loop: the sessions close
        # there, while the loop still runs (a session left to the garbage collector logs an
        # error and leaves its sockets open).
        per_loop.closer = _close_at_loop_end(loop, per_loop)
        loop.create_task(anext(per_loop.closer))  # type: ignore[arg-type]
    endpoint = per_loop.get(key)
    if endpoint is None:
        endpoint = per_loop[key] = _ChatEndpoint(spec, timeout)
    return endpoint


async def _close_at_loop_end(loop: asyncio.AbstractEventLoop, per_loop: _LoopEndpoints) -> AsyncIterator[None]:
    try:
        yield
    finally:
        # Forgotten first: the sessions hold their loop, so the entry would never leave the
        # weak dictionary by itself.
        _CLIENTS.pop(loop, None)
        for endpoint in list(per_loop.values()):
            await endpoint.session.close()


_SYNC_CLIENTS: dict[tuple, openai.OpenAI] = {}
_SYNC_CLIENTS_LOCK = threading.Lock()


def _sync_client(spec: ModelSpec, timeout: float) -> openai.OpenAI:
    """One sync client per endpoint and process (its httpx pool is thread-safe): a query
    embedding per search must not build a client, and an SSL context, each time."""
    options = spec.options
    key = (options.get("base_url"), resolve_api_key(spec), timeout, int(options.get("max_retries", 0)))
    with _SYNC_CLIENTS_LOCK:
        client = _SYNC_CLIENTS.get(key)
        if client is None:
            client = openai.OpenAI(
                base_url=key[0],
                api_key=key[1],
                timeout=timeout,
                max_retries=key[3],
                http_client=openai.DefaultHttpxClient(verify=_ssl_context(), timeout=timeout),
            )
            _SYNC_CLIENTS[key] = client
    return client


class OpenAIChatProvider:
    """Chat over an OpenAI-compatible ``/chat/completions`` stream, with total and idle
    deadlines and every transport or upstream failure mapped to ``LLMError``."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.model = str(spec.options.get("model") or spec.name)
        self.timeouts = Timeouts.from_spec(spec)
        self.coalesce = float(spec.options.get("stream_coalesce_ms", DEFAULT_COALESCE_MS)) / 1000

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        return guard_stream(
            self._stream(messages, tools, max_tokens),
            self.timeouts,
            model=self.spec.name,
        )

    def _request_body(self, messages: Sequence[Message], tools: Sequence[ToolSpec], max_tokens: int | None) -> bytes:
        options = self.spec.options
        request: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages),
            "stream": True,
        }
        if options.get("stream_usage", True):
            request["stream_options"] = {"include_usage": True}
        if tools:
            request["tools"] = to_openai_tools(tools)
        if max_tokens is not None:
            request[options.get("max_tokens_param", "max_tokens")] = max_tokens
        if options.get("temperature") is not None:
            request["temperature"] = options["temperature"]
        return json.dumps(request, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None,
    ) -> AsyncIterator[StreamEvent]:
        text: list[str] = []
        assembler = ToolCallAssembler(self.spec.name)
        usage: Usage | None = None
        try:
            endpoint = _chat_endpoint(self.spec, self.timeouts.total)
            body = self._request_body(messages, tools, max_tokens)
            response = await endpoint.post(body)
            # The response is closed on every exit: read to its end it goes back to the pool;
            # left early (the client went away, a deadline) its connection is dropped, which
            # tells the provider to stop generating.
            pace = _ReadPace()
            async with response:
                done = False
                # The events of one read are handled together and their text goes on as one delta
                # (after the first sentence a read gathers a dozen tokens: see ``_ReadPace``).
                async for batch in sse_batches(_paced_reads(response, pace)):
                    content = ""
                    finished = False
                    for data in batch:
                        # Read on to the body's end (it follows [DONE] at once): a response left
                        # unread cannot give its connection back to the pool, and every round would
                        # open a new one (TCP, and TLS with a real provider).
                        if done or data == "[DONE]":
                            done = True
                            continue
                        try:
                            piece, ended, reported = self._chunk(data, assembler)
                        except Exception:
                            if content:  # what came before the failure was streamed: it is the answer's
                                text.append(content)
                                yield TextDelta(content)
                            raise
                        content += piece
                        finished = finished or ended
                        usage = reported or usage
                    # The round's end (usage, [DONE]) follows a finish at once: read it at once.
                    pace.after(content, 0.0 if finished else self.coalesce)
                    if content:
                        text.append(content)
                        yield TextDelta(content)
                    else:
                        yield KEEPALIVE
        except LLMError:
            raise
        except Exception as error:
            # The transport's errors and the stream decoder's, all mapped in one place.
            raise map_chat_error(error, self.spec.name) from error
        calls = assembler.calls()
        if calls:
            yield ToolCalls(calls)
        yield usage or Usage(
            estimate_input_tokens(messages, tools),
            estimate_output_tokens("".join(text), calls),
            estimated=True,
        )

    def _chunk(self, data: str, assembler: ToolCallAssembler) -> tuple[str, bool, Usage | None]:
        """One stream chunk: (its text, whether a choice finished, the usage it reports); its tool
        call fragments go to ``assembler``."""
        chunk = json.loads(data)
        if not isinstance(chunk, dict):
            raise ValueError(f"a stream chunk is not an object: {data[:100]!r}")
        if chunk.get("error"):
            raise LLMError(
                f"model {self.spec.name!r} failed mid-stream: {_error_text(chunk['error'])}",
                code=LLM_UNAVAILABLE,
            )
        usage = None
        reported = chunk.get("usage")
        if isinstance(reported, dict):
            usage = Usage(int(reported.get("prompt_tokens") or 0), int(reported.get("completion_tokens") or 0))
        content = ""
        finished = False
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            finished = finished or bool(choice.get("finish_reason"))
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            content += delta.get("content") or ""
            for fragment in delta.get("tool_calls") or ():
                assembler.add(fragment)
        return content, finished, usage


class OpenAIEmbeddingProvider:
    """Sync embeddings over an OpenAI-compatible ``/embeddings`` endpoint, in batches."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.model = str(spec.options.get("model") or spec.name)
        dimensions = spec.options.get("dimensions")
        self.dim: int | None = int(dimensions) if dimensions else None
        self.batch_size = int(spec.options.get("batch_size", 64))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        extra: dict[str, Any] = {"dimensions": self.dim} if self.dim else {}
        vectors: list[list[float]] = []
        try:
            client = _sync_client(self.spec, float(self.spec.options.get("timeout", 60.0)))
            for start in range(0, len(texts), self.batch_size):
                batch = list(texts[start : start + self.batch_size])
                response = client.embeddings.create(model=self.model, input=batch, **extra)
                items = sorted(response.data, key=lambda item: item.index)
                if len(items) != len(batch):
                    raise LLMError(
                        f"model {self.spec.name!r} returned {len(items)} embeddings for {len(batch)} texts",
                        code=LLM_BAD_RESPONSE,
                    )
                vectors.extend(list(item.embedding) for item in items)
        except Exception as error:
            raise map_openai_error(error, self.spec.name) from error
        if self.dim is None and vectors:
            self.dim = len(vectors[0])
        return vectors
