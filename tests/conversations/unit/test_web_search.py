"""The SearxNG-compatible ``web_search`` provider (offered only when the admin enabled it)."""

import httpx
import pytest
from asgiref.sync import async_to_sync

from achilles.errors import ServiceUnavailable
from conversations.websearch import SearxngWebSearch, WebResult

pytestmark = [pytest.mark.unit]


def test_searxng_json_results_are_parsed():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        return httpx.Response(
            200,
            json={
                "results": [
                    {"title": "Курс ЦБ", "url": "https://cbr.example/rate", "content": "Курс 90 рублей."},
                    {"title": "без ссылки"},
                    {"url": "https://b.example", "content": ""},
                ]
            },
        )

    provider = SearxngWebSearch("http://searx.local/", transport=httpx.MockTransport(handler))

    results = async_to_sync(provider.search)("курс доллара", 5)

    assert results == [
        WebResult("Курс ЦБ", "https://cbr.example/rate", "Курс 90 рублей."),
        WebResult("https://b.example", "https://b.example", ""),
    ]
    assert seen[0].path == "/search" and seen[0].params["format"] == "json" and seen[0].params["q"] == "курс доллара"


def test_searxng_failure_is_service_unavailable():
    provider = SearxngWebSearch("http://searx.local", transport=httpx.MockTransport(lambda r: httpx.Response(502)))

    with pytest.raises(ServiceUnavailable) as failed:
        async_to_sync(provider.search)("x", 5)

    assert failed.value.code == "web_search_unavailable"


def test_a_failing_web_search_leaves_the_knowledge_answer(memory_engine, alice):
    from tests.conversations.conftest import candidate, result
    from tests.llm_fake import answer, call_tools, tool_call

    class Down:
        async def search(self, query, limit):
            raise ServiceUnavailable("searx is down", code="web_search_unavailable")

    memory_engine.settings(web_search_enabled=True, web_search_url="http://searx.local")
    memory_engine.deps.web_search = lambda settings: Down()
    memory_engine.ks.default = result(candidate(1, "Факт из базы."))
    memory_engine.script(
        call_tools(tool_call("search_knowledge", "k", query="факт"), tool_call("web_search", "w", query="факт")),
        answer("Факт из базы [1]."),
    )

    outcome = memory_engine.turn(alice, "Какой факт?")

    assert outcome.error is None
    assert [c["record_id"] for c in outcome.done.citations] == [1]
