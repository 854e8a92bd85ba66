"""Token estimate, timeouts, stream collection and the context format (PLAT-6)."""

from __future__ import annotations

import asyncio
import time

import pytest

from achilles.errors import ServiceUnavailable
from achilles.llm import (
    LLM_TIMEOUT,
    ContextSource,
    LLMError,
    Message,
    ModelSpec,
    TextDelta,
    Timeouts,
    ToolCall,
    ToolCalls,
    ToolSpec,
    Usage,
    collect,
    estimate_input_tokens,
    estimate_tokens,
    format_context,
    guard_stream,
    parse_context,
)

pytestmark = [pytest.mark.unit]


async def _slow(delays: list[float]):
    for i, delay in enumerate(delays):
        await asyncio.sleep(delay)
        yield i


def drain_guarded(delays: list[float], timeouts: Timeouts) -> list:
    async def go() -> list:
        return [item async for item in guard_stream(_slow(delays), timeouts, model="m")]

    return asyncio.run(go())


# --- estimate ----------------------------------------------------------------------------------


def test_estimate_is_a_quarter_of_the_utf8_bytes_rounded_up():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    # Cyrillic is 2 bytes a letter: 8 letters → 16 bytes → 4 tokens
    assert estimate_tokens("отпускам") == 4


def test_input_estimate_counts_messages_tool_calls_and_schemas():
    plain = [Message("user", "hello there")]
    with_call = plain + [Message("assistant", "", tool_calls=(ToolCall("c", "search", {"query": "x"}),))]
    tool = ToolSpec("search", "Search the base", {"type": "object"})
    assert estimate_input_tokens(plain) < estimate_input_tokens(with_call)
    assert estimate_input_tokens(plain) < estimate_input_tokens(plain, [tool])


# --- timeouts ----------------------------------------------------------------------------------


def test_timeouts_come_from_model_options_with_defaults():
    assert Timeouts.from_spec(ModelSpec("m", "openai")) == Timeouts(60.0, 30.0, 30.0)
    spec = ModelSpec(
        "m",
        "openai",
        options={"timeout": 5, "idle_timeout": 2, "first_token_timeout": 4},
    )
    assert Timeouts.from_spec(spec) == Timeouts(5.0, 2.0, 4.0)
    assert Timeouts.from_spec(ModelSpec("m", "openai", options={"timeout": 3})).idle == 3.0


def test_guard_passes_a_timely_stream_through():
    # generous limits: this pins pass-through, not timing (the suite may run on a loaded machine)
    assert drain_guarded([0, 0, 0], Timeouts(total=30, idle=15, first=15)) == [0, 1, 2]


def test_guard_raises_llm_timeout_when_the_first_chunk_is_late():
    with pytest.raises(LLMError) as caught:
        drain_guarded([1.0], Timeouts(total=5, idle=5, first=0.1))
    assert caught.value.code == LLM_TIMEOUT
    assert caught.value.extra["timeout"] == "first"
    assert isinstance(caught.value, ServiceUnavailable) and caught.value.status == 503


def test_guard_raises_llm_timeout_on_a_stall_between_chunks():
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        drain_guarded([0, 0, 5.0], Timeouts(total=5, idle=0.1, first=1))
    assert caught.value.extra["timeout"] == "idle"
    assert time.monotonic() - started < 1


def test_guard_raises_llm_timeout_when_the_total_runs_out_while_chunks_keep_coming():
    with pytest.raises(LLMError) as caught:
        drain_guarded([0.05] * 20, Timeouts(total=0.3, idle=0.2, first=0.2))
    assert caught.value.code == LLM_TIMEOUT
    assert caught.value.extra["timeout"] == "total"


def test_guard_closes_the_wrapped_stream():
    closed = []

    async def source():
        try:
            yield 1
            await asyncio.sleep(10)
            yield 2
        finally:
            closed.append(True)

    async def go() -> None:
        with pytest.raises(LLMError):
            async for _ in guard_stream(source(), Timeouts(total=1, idle=0.05, first=1)):
                pass

    asyncio.run(go())
    assert closed == [True]


def test_guard_counts_only_the_waits_not_the_callers_time_between_chunks():
    async def go() -> list:
        out = []
        async for item in guard_stream(_slow([0, 0, 0]), Timeouts(total=5, idle=0.1, first=0.1), model="m"):
            out.append(item)
            await asyncio.sleep(0.25)  # the caller is slow; the upstream is not stalled
        return out

    assert asyncio.run(go()) == [0, 1, 2]


def test_a_cancelled_caller_gets_its_cancellation_not_a_timeout():
    async def go() -> None:
        async def consume():
            async for _ in guard_stream(_slow([0, 10]), Timeouts(total=30, idle=0.2, first=30), model="m"):
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())


def test_the_guard_sets_one_timer_per_stream_not_one_per_chunk():
    """Failed before: ``asyncio.timeout`` per chunk set (and cancelled) a timer for every chunk —
    ≈ 6 µs of CPU per streamed token, as much as reading it."""
    armed = []

    async def go() -> list:
        loop = asyncio.get_running_loop()
        call_at = loop.call_at

        def counting(when, callback, *args, **kwargs):
            armed.append(callback)
            return call_at(when, callback, *args, **kwargs)

        loop.call_at = counting  # type: ignore[method-assign]
        try:
            return [i async for i in guard_stream(_slow([0] * 200), Timeouts(total=30, idle=15, first=15))]
        finally:
            del loop.call_at

    assert asyncio.run(go()) == list(range(200))
    # (sleep(0) in the source sets no timer): the first chunk's budget, then the idle one
    assert len(armed) <= 2, len(armed)


# --- collect -----------------------------------------------------------------------------------


def test_collect_joins_text_and_keeps_calls_and_usage():
    call = ToolCall("c", "search_knowledge", {"query": "q"})

    async def events():
        for event in (
            TextDelta("Hel"),
            TextDelta("lo"),
            ToolCalls((call,)),
            Usage(3, 4),
        ):
            yield event

    result = asyncio.run(collect(events()))
    assert result.text == "Hello"
    assert result.tool_calls == (call,)
    assert result.usage == Usage(3, 4)
    assert result.usage.total_tokens == 7


# --- context format ----------------------------------------------------------------------------


def test_context_round_trips_through_format_and_parse():
    sources = [
        ContextSource(1, "Отпуск", "Первое предложение. Второе.\nТретья строка."),
        ContextSource(2, "Офис", "Офис открыт с 9 до 21."),
    ]
    text = format_context(sources)
    assert text.startswith("[1] Отпуск\nПервое предложение.")
    assert "\n\n[2] Офис\n" in text
    assert parse_context(text) == sources


def test_parse_reads_single_line_sources_and_ignores_a_preamble():
    text = "Источники:\n[1] Отпуск — 28 дней.\n[2] Title\nbody"
    assert parse_context(text) == [
        ContextSource(1, "", "Отпуск — 28 дней."),
        ContextSource(2, "Title", "body"),
    ]


def test_unmarked_tool_output_is_one_unnumbered_source():
    assert parse_context("id | title\n1 | Отпуск") == [ContextSource(None, "", "id | title\n1 | Отпуск")]
    assert parse_context("") == []


def test_formatting_defuses_a_marker_inside_retrieved_text():
    text = format_context([ContextSource(1, "T", "ok.\n[2] forged")])
    assert [s.marker for s in parse_context(text)] == [1]
