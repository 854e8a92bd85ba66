"""Which tools a turn offers and what a model's tool round amounts to (QE-2, QE-4, QE-5).

Pure: no ORM, no I/O. The pipeline asks ``tool_set`` before round 1 and ``plan_tool_round``
after it; everything the model asked beyond one ``search_knowledge`` and one ``web_search`` is
ignored (answered with a short tool message, so the transcript stays well-formed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from achilles.llm import ToolCall, ToolSpec
from knowledge.facade import MAX_QUERY_CHARS

SEARCH_KNOWLEDGE = "search_knowledge"
WEB_SEARCH = "web_search"

SEARCH_KNOWLEDGE_TOOL = ToolSpec(
    name=SEARCH_KNOWLEDGE,
    description=(
        "Search the company knowledge base. Call it for any question about the company, its "
        "documents, people, processes or facts. Pass ONE self-contained query: resolve pronouns "
        "and follow-ups from the conversation (e.g. «а у него?» → «отпуск Иванова»)."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "A self-contained search query."}},
        "required": ["query"],
    },
)

WEB_SEARCH_TOOL = ToolSpec(
    name=WEB_SEARCH,
    description="Search the public web. Use only for public, non-company information.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "A self-contained web search query."}},
        "required": ["query"],
    },
)

IGNORED_CALL_RESULT = "Ignored: one search per tool per turn; answer from the results you have."


def tool_set(*, knowledge_empty: bool, web_search_enabled: bool) -> tuple[ToolSpec, ...]:
    """``search_knowledge`` only when KS has content, ``web_search`` only when the admin enabled it."""
    tools: list[ToolSpec] = []
    if not knowledge_empty:
        tools.append(SEARCH_KNOWLEDGE_TOOL)
    if web_search_enabled:
        tools.append(WEB_SEARCH_TOOL)
    return tuple(tools)


@dataclass(frozen=True)
class ToolPlan:
    """What to run after round 1: at most one KS search and one web search, in parallel."""

    search: ToolCall | None
    web: ToolCall | None
    ignored: tuple[ToolCall, ...]

    @property
    def is_grounding(self) -> bool:
        return self.search is not None or self.web is not None

    @property
    def search_query(self) -> str | None:
        return query_of(self.search) if self.search else None

    @property
    def web_query(self) -> str | None:
        return query_of(self.web) if self.web else None


def query_of(call: ToolCall) -> str:
    """The model's standalone query. Only ``query`` is read: any identity-like argument the model
    invents (``user``, ``principals``, …) is ignored; identity always comes from the session."""
    value = call.arguments.get("query")
    if not isinstance(value, str):
        return ""
    value = value.strip()
    if len(value) > MAX_QUERY_CHARS:
        # A model may echo a very long message as its "standalone" query: search with its head
        # (cut at a word boundary) rather than fail the turn on the store's limit.
        value = value[:MAX_QUERY_CHARS].rsplit(None, 1)[0]
    return value


def plan_tool_round(calls: Sequence[ToolCall], offered: Sequence[ToolSpec]) -> ToolPlan:
    offered_names = {tool.name for tool in offered}
    search = web = None
    ignored: list[ToolCall] = []
    for call in calls:
        if call.name not in offered_names or not query_of(call):
            ignored.append(call)
        elif call.name == SEARCH_KNOWLEDGE and search is None:
            search = call
        elif call.name == WEB_SEARCH and web is None:
            web = call
        else:
            ignored.append(call)
    return ToolPlan(search=search, web=web, ignored=tuple(ignored))
