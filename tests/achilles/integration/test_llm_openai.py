"""The OpenAI provider through the real SDK against an OpenAI-compatible stub on loopback."""

from __future__ import annotations

import asyncio
import time

import pytest

from achilles.llm import (
    LLM_BAD_RESPONSE,
    LLM_TIMEOUT,
    LLM_UNAVAILABLE,
    ChatProvider,
    HashEmbeddingProvider,
    LLMError,
    Message,
    ModelSpec,
    TextDelta,
    ToolCall,
    ToolCalls,
    ToolSpec,
    Usage,
    get_chat_provider,
    get_embedding_provider,
)
from tests.achilles.llm_stub_server import StubLLMServer, StubReply, StubToolCall

pytestmark = [pytest.mark.integration]

SEARCH = ToolSpec(
    "search_knowledge",
    "Search the knowledge base",
    {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)
QUESTION = [Message("system", "Be brief."), Message("user", "Сколько дней отпуска?")]


@pytest.fixture
def stub():
    with StubLLMServer() as server:
        yield server


def chat(stub: StubLLMServer, **options: object) -> ChatProvider:
    options = {"base_url": stub.base_url, "timeout": 5, "idle_timeout": 2, **options}
    return get_chat_provider(ModelSpec("stub-chat", "openai", options=options))


def drain(stream) -> list:
    async def go() -> list:
        return [event async for event in stream]

    return asyncio.run(go())


def failure(stream) -> LLMError:
    with pytest.raises(LLMError) as caught:
        drain(stream)
    return caught.value


def test_text_streams_in_pieces_and_ends_with_provider_usage(stub):
    # given
    # (chunks apart in time: what arrives in one read is handed on as one delta)
    stub.replies.append(StubReply(text="Ежегодный отпуск — 28 дней.", chunk_chars=5, usage=(40, 9), token_delay=0.01))
    # when
    events = drain(chat(stub).stream(QUESTION, max_tokens=64))
    # then
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 5
    assert "".join(d.text for d in deltas) == "Ежегодный отпуск — 28 дней."
    assert events[-1] == Usage(40, 9, estimated=False)
    assert not [e for e in events if isinstance(e, ToolCalls)]


def test_request_carries_model_messages_tools_limit_and_usage_option(stub, monkeypatch):
    # given
    monkeypatch.setenv("STUB_LLM_KEY", "sk-test-123")
    stub.replies.append(StubReply(text="ok"))
    history = [
        Message("user", "Сколько дней отпуска?"),
        Message(
            "assistant",
            "",
            tool_calls=(ToolCall("c1", "search_knowledge", {"query": "отпуск"}),),
        ),
        Message("tool", "[1] Отпуск\n28 дней.", tool_call_id="c1"),
    ]
    # when
    drain(chat(stub, model="vendor/model-1", api_key_env="STUB_LLM_KEY").stream(history, [SEARCH], max_tokens=32))
    # then
    (request,) = stub.requests
    body = request.body
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test-123"
    assert body["model"] == "vendor/model-1"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 32
    assert body["tools"][0]["function"]["name"] == "search_knowledge"
    assert body["messages"][1]["tool_calls"][0]["function"] == {
        "name": "search_knowledge",
        "arguments": '{"query": "отпуск"}',
    }
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "[1] Отпуск\n28 дней.",
    }


def test_tool_calls_split_across_chunks_are_assembled_by_index(stub):
    # given
    stub.replies.append(
        StubReply(
            tool_calls=[
                StubToolCall(
                    "search_knowledge",
                    {"query": "сколько дней отпуска положено"},
                    id="call_a",
                ),
                StubToolCall("web_search", {"q": "vacation law", "limit": 3}, id="call_b"),
            ],
            chunk_chars=3,
        )
    )
    # when
    events = drain(chat(stub).stream(QUESTION, [SEARCH]))
    # then
    (calls,) = [e for e in events if isinstance(e, ToolCalls)]
    assert calls.calls == (
        ToolCall("call_a", "search_knowledge", {"query": "сколько дней отпуска положено"}),
        ToolCall("call_b", "web_search", {"q": "vacation law", "limit": 3}),
    )
    assert isinstance(events[-1], Usage)
    assert events.index(calls) == len(events) - 2


def test_without_provider_usage_the_local_estimate_is_reported(stub):
    stub.replies.append(StubReply(text="hello world", usage=None))
    usage = drain(chat(stub).stream(QUESTION))[-1]
    assert isinstance(usage, Usage) and usage.estimated
    assert usage.input_tokens > 0 and usage.output_tokens == 3


def test_usage_option_can_be_switched_off_for_servers_that_reject_it(stub):
    stub.replies.append(StubReply(text="hi"))
    drain(chat(stub, stream_usage=False).stream(QUESTION))
    assert "stream_options" not in stub.requests[0].body


@pytest.mark.parametrize("status", [500, 401, 429])
def test_http_errors_become_llm_unavailable_with_the_status(stub, status):
    stub.replies.append(StubReply(status=status, error_message="upstream says no"))
    error = failure(chat(stub).stream(QUESTION))
    assert error.code == LLM_UNAVAILABLE
    assert error.extra["provider_status"] == status
    assert "upstream says no" in str(error.detail)
    assert len(stub.requests) == 1  # no silent retries


def test_invalid_tool_arguments_are_a_bad_response(stub):
    stub.replies.append(StubReply(tool_calls=[StubToolCall("search_knowledge", '{"query": "отп')]))
    error = failure(chat(stub).stream(QUESTION, [SEARCH]))
    assert error.code == LLM_BAD_RESPONSE
    assert "search_knowledge" in error.detail


def test_garbage_in_the_stream_is_a_bad_response(stub):
    stub.replies.append(StubReply(raw_data=["{this is not json"]))
    assert failure(chat(stub).stream(QUESTION)).code == LLM_BAD_RESPONSE


def test_an_error_object_in_the_stream_is_unavailable_with_its_message(stub):
    ok = '{"choices": [{"index": 0, "delta": {"content": "Нач"}}]}'
    stub.replies.append(StubReply(raw_data=[ok, '{"error": {"message": "overloaded", "type": "server_error"}}']))
    error = failure(chat(stub).stream(QUESTION))
    assert error.code == LLM_UNAVAILABLE and "overloaded" in str(error)


@pytest.mark.parametrize("failing", ['{"error": {"message": "overloaded"}}', "{this is not json"])
def test_text_read_together_with_a_failing_chunk_is_handed_on_before_the_error(stub, failing):
    # given text and a failing chunk in one read (what one read brings goes on as one delta)
    ok = '{"choices": [{"index": 0, "delta": {"content": "Начало ответа."}}]}'
    stub.replies.append(StubReply(raw_data=[ok, ok, failing]))
    seen: list[str] = []

    async def go() -> None:
        async for event in chat(stub).stream(QUESTION):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    # when / then: the text came first, then the error, as when every chunk was its own delta
    with pytest.raises(LLMError):
        asyncio.run(go())
    assert "".join(seen) == "Начало ответа.Начало ответа."


def test_a_chunk_that_is_not_an_object_is_a_bad_response(stub):
    stub.replies.append(StubReply(raw_data=["[1, 2]"]))
    assert failure(chat(stub).stream(QUESTION)).code == LLM_BAD_RESPONSE


def test_an_event_whose_data_spans_several_lines_is_joined(stub):
    # SSE: consecutive data lines of one event are one payload joined by newlines
    split = '{"choices": [{"index": 0,\ndata: "delta": {"content": "Да"}}]}'
    stub.replies.append(StubReply(raw_data=[split]))
    events = drain(chat(stub).stream(QUESTION))
    assert [e.text for e in events if isinstance(e, TextDelta) and e.text] == ["Да"]


def test_sse_data_skips_comments_and_other_fields():
    from achilles.llm.openai_provider import sse_data

    async def lines():
        for line in [": keep-alive", "event: message", "id: 7", "data: a", "data:b", "", "", "data: [DONE]"]:
            yield line

    async def go():
        return [data async for data in sse_data(lines())]

    assert asyncio.run(go()) == ["a\nb", "[DONE]"]


def test_a_server_that_never_answers_times_out_within_the_configured_limit(stub):
    # given
    stub.replies.append(StubReply(text="too late", ttft=30))
    started = time.monotonic()
    # when
    error = failure(chat(stub, timeout=1, idle_timeout=1).stream(QUESTION))
    # then
    assert error.code == LLM_TIMEOUT
    assert time.monotonic() - started < 2.5


def test_a_stream_that_stalls_midway_times_out_on_the_idle_limit(stub):
    stub.replies.append(StubReply(text="abcdefghijkl", chunk_chars=2, stall_after=3))
    seen: list = []

    async def go() -> None:
        async for event in chat(stub, timeout=10, idle_timeout=0.5).stream(QUESTION):
            seen.append(event)

    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        asyncio.run(go())
    assert caught.value.code == LLM_TIMEOUT and caught.value.extra["timeout"] == "idle"
    assert time.monotonic() - started < 2.5
    assert seen and all(isinstance(e, TextDelta) for e in seen)


def test_time_to_first_token_and_pacing_are_honoured(stub):
    stub.replies.append(StubReply(text="abcdef", chunk_chars=1, ttft=0.3, token_delay=0.05))
    started = time.monotonic()
    arrivals: list[float] = []

    async def go() -> None:
        async for event in chat(stub).stream(QUESTION):
            if isinstance(event, TextDelta):
                arrivals.append(time.monotonic() - started)

    asyncio.run(go())
    assert arrivals[0] >= 0.3
    assert arrivals[-1] - arrivals[0] >= 0.2


def test_an_unreachable_server_is_llm_unavailable():
    with StubLLMServer() as gone:
        base_url = gone.base_url
    provider = get_chat_provider(ModelSpec("x", "openai", options={"base_url": base_url, "timeout": 2}))
    assert failure(provider.stream(QUESTION)).code == LLM_UNAVAILABLE


def test_a_missing_key_variable_is_reported_by_name(stub, monkeypatch):
    monkeypatch.delenv("ACHILLES_TEST_MISSING_KEY", raising=False)
    error = failure(chat(stub, api_key_env="ACHILLES_TEST_MISSING_KEY").stream(QUESTION))
    assert error.code == LLM_UNAVAILABLE and "ACHILLES_TEST_MISSING_KEY" in error.detail
    assert stub.requests == []


# --- embeddings --------------------------------------------------------------------------------


def embedder(stub: StubLLMServer, **options):
    spec = ModelSpec(
        "stub-emb",
        "openai",
        kind="embedding",
        options={"base_url": stub.base_url, **options},
    )
    return get_embedding_provider(spec)


def test_embeddings_come_back_in_input_order_and_in_batches(stub):
    texts = ["отпуск", "парковка", "VPN", "офис", "больничный"]
    vectors = embedder(stub, batch_size=2).embed(texts)
    expected = HashEmbeddingProvider(dim=stub.embedding_dim).embed(texts)
    assert len(vectors) == len(expected)
    for got, want in zip(vectors, expected, strict=True):
        assert got == pytest.approx(want, abs=1e-6)  # float32 on the wire
    assert [len(r.body["input"]) for r in stub.requests] == [2, 2, 1]


def test_embedding_dimensions_are_requested(stub):
    (vector,) = embedder(stub, dimensions=8).embed(["отпуск"])
    assert len(vector) == 8 and stub.requests[0].body["dimensions"] == 8


def test_embedding_errors_become_llm_errors(stub):
    stub.embedding_status = 500
    with pytest.raises(LLMError) as caught:
        embedder(stub).embed(["x"])
    assert caught.value.code == LLM_UNAVAILABLE and caught.value.extra["provider_status"] == 500


def test_no_texts_means_no_request(stub):
    assert embedder(stub).embed([]) == []
    assert stub.requests == []


def test_calls_on_one_event_loop_share_one_client_and_a_stopped_stream_frees_its_connection(stub):
    from achilles.llm import openai_provider

    stub.replies.extend([StubReply(text="Раз два три четыре пять шесть.", chunk_chars=3) for _ in range(3)])
    provider = chat(stub)

    async def go():
        # a consumer that stops after the first piece (a client that went away) ...
        stream = provider.stream(QUESTION)
        async for _event in stream:
            break
        await stream.aclose()
        # ... then two complete calls on the same loop
        full = [[event async for event in provider.stream(QUESTION)] for _ in range(2)]
        return full, openai_provider._CLIENTS[asyncio.get_running_loop()]

    full, clients = asyncio.run(go())
    assert len(clients) == 1
    assert all(isinstance(events[-1], Usage) for events in full)
