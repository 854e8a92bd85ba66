"""search · graph · sql as calls of the Knowledge Store primitives under the owner's identity."""

from __future__ import annotations

import pytest

from achilles.errors import ValidationFailed
from achilles.llm.builtin import BuiltinChatProvider
from achilles.llm.context import parse_context
from achilles.llm.types import ToolCall
from agents.loop import run_loop
from agents.prompt import compose_messages, tool_specs
from agents.tools import TOOL_NAMES, KnowledgeTools
from knowledge.facade import Withheld
from tests.agents.fakes import OWNER_IDENTITY, FakeKnowledgeStore
from tests.llm_fake import ScriptedChatProvider, answer

pytestmark = [pytest.mark.unit]


@pytest.mark.p0
@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("search", {"query": "отпуск"}, "отпуск"),
        ("graph", {"record_id": 5}, 5),
        (
            "sql",
            {"query": "SELECT source_system, count(*) FROM ks_records GROUP BY 1"},
            "SELECT source_system, count(*) FROM ks_records GROUP BY 1",
        ),
    ],
)
def test_search_graph_sql_are_raised_by_tool_call_name_and_call_the_matching_ks_primitive(name, arguments, expected):
    ks = FakeKnowledgeStore()
    tools = KnowledgeTools(OWNER_IDENTITY, ks=ks)
    observation = tools.call(ToolCall(id="1", name=name, arguments=arguments))
    assert ks.calls == [(name, expected, OWNER_IDENTITY)]
    assert observation and not observation.startswith("error")


@pytest.mark.p0
def test_tools_run_under_the_owner_identity_and_acl_is_cut_on_the_ks_side():
    # given KS that withholds a record the owner may not see
    ks = FakeKnowledgeStore(withheld=(Withheld(source_system="confluence", author_principal_id="user:9"),))
    tools = KnowledgeTools(OWNER_IDENTITY, ks=ks)
    # when the model calls search with an identity smuggled into the arguments
    observation = tools.call(ToolCall(id="1", name="search", arguments={"query": "зарплаты"}))
    tools.call(ToolCall(id="2", name="search", arguments={"query": "x", "identity": "user:1", "principals": ["admin"]}))
    # then every primitive got the owner's identity, never anything from the model
    assert {identity for _, _, identity in ks.calls} == {OWNER_IDENTITY}
    # and the withheld record shows only as coordinates
    assert "confluence" in observation and "user:9" not in observation


@pytest.mark.p0
def test_empty_ks_puts_no_knowledge_tools_in_the_set_and_the_agent_reports_no_data_honestly():
    """«locked» means "cannot be switched off by hand", not "present whatever the state of the base"
    (AE-TOOLS, issue 14): on an empty base search/graph/sql are not offered, the agent still runs
    and says there is no data. Failed before the fix: the three tools were offered on an empty base."""
    ks = FakeKnowledgeStore(empty=True)
    model = BuiltinChatProvider()
    result = run_loop(
        provider=model,
        messages=compose_messages(
            platform_prompt="", agent_instructions="Что у нас с отпусками?", knowledge_empty=True
        ),
        tools=tool_specs(knowledge_empty=True),
        call_tool=KnowledgeTools(OWNER_IDENTITY, ks=ks).call,
        cap=4,
    )
    assert tool_specs(knowledge_empty=True) == ()
    assert ks.names() == []  # nothing to search, nothing searched
    # the offline model says it has nothing to quote, and invents nothing about the task
    assert "базы знаний" in result.output and "отпуск" not in result.output.lower()


@pytest.mark.p1
def test_tool_set_follows_the_ks_state():
    """Failed before the fix: the set was the same for an empty and a filled base."""
    seen = []
    for empty in (True, False):
        model = ScriptedChatProvider([answer("ok")])
        run_loop(
            provider=model,
            messages=compose_messages(platform_prompt="", agent_instructions="x", knowledge_empty=empty),
            tools=tool_specs(knowledge_empty=empty),
            call_tool=KnowledgeTools(OWNER_IDENTITY, ks=FakeKnowledgeStore(empty=empty)).call,
            cap=1,
        )
        seen.append(([t.name for t in model.calls[0].tools], model.calls[0].messages[0].content))
    assert seen[0][0] == [] and seen[1][0] == list(TOOL_NAMES) == ["search", "graph", "sql"]
    assert "knowledge base is empty" in seen[0][1] and "knowledge base is empty" not in seen[1][1]


@pytest.mark.p1
def test_a_ks_error_is_an_observation_for_the_model_not_a_crash():
    ks = FakeKnowledgeStore(sql_error=ValidationFailed("only SELECT over ks_* views", code="sql_rejected"))
    observation = KnowledgeTools(OWNER_IDENTITY, ks=ks).call(
        ToolCall(id="1", name="sql", arguments={"query": "DROP TABLE x"})
    )
    assert observation.startswith("error (sql_rejected)")


@pytest.mark.p1
def test_unknown_tool_name_or_bad_arguments_become_observations():
    tools = KnowledgeTools(OWNER_IDENTITY, ks=FakeKnowledgeStore())
    assert tools.call(ToolCall(id="1", name="web", arguments={})).startswith("error: unknown tool")
    assert tools.call(ToolCall(id="2", name="graph", arguments={"record_id": "abc"})).startswith(
        "error (bad_arguments)"
    )


@pytest.mark.p1
def test_search_results_are_numbered_sources_the_builtin_model_can_quote():
    ks = FakeKnowledgeStore(
        documents=[("Отпуск", "Сотрудникам положено 28 дней отпуска."), ("ДМС", "Полис ДМС выдаёт HR.")]
    )
    text = KnowledgeTools(OWNER_IDENTITY, ks=ks).call(ToolCall(id="1", name="search", arguments={"query": "отпуск"}))
    sources = parse_context(text)
    assert [s.marker for s in sources] == [1, 2]
    builtin = run_loop(
        provider=BuiltinChatProvider(),
        messages=compose_messages(platform_prompt="", agent_instructions="Сколько дней отпуска?"),
        tools=tool_specs(),
        call_tool=KnowledgeTools(OWNER_IDENTITY, ks=ks).call,
        cap=3,
    )
    assert "28 дней" in builtin.output and "[1]" in builtin.output


def test_sources_are_numbered_on_across_searches_and_the_output_keeps_the_ones_it_cites():
    ks = FakeKnowledgeStore()
    tools = KnowledgeTools(OWNER_IDENTITY, ks=ks)
    first = tools.call(ToolCall(id="1", name="search", arguments={"query": "отпуск"}))
    count = len(tools.sources)
    second = tools.call(ToolCall(id="2", name="search", arguments={"query": "больничный"}))

    # the second search's sources go on from the first's, so an [N] names one source
    assert "[1]" in first and f"[{count + 1}]" in second and "[1]" not in second
    cited = tools.cited(f"Отпуск [1]. Больничный [{count + 1}]. Пример: `[2]` и [99].")
    assert [s["marker"] for s in cited] == [1, count + 1]
    assert cited[0]["record_id"] == tools.sources[1]["record_id"]
