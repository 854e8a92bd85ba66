"""The agent's tools (AE-TOOLS): ``search``, ``graph``, ``sql`` — Knowledge Store primitives.

Each call goes to ``knowledge.facade`` under the OWNER's identity; ACL is cut inside KS. The
three are locked (an owner cannot switch them off) but are not offered on an empty KS
(``agents.prompt.tool_specs``); an empty KS is not a readiness gate — the run starts and the agent
reports honestly that there is no data. A tool error (a rejected SQL, a missing record) is an
observation for the model, never a crash of the run.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from achilles.errors import ApplicationError
from achilles.llm import ContextSource, ToolCall, ToolSpec, format_context
from knowledge import facade

logger = logging.getLogger(__name__)

SEARCH_K = 8
MAX_SQL_ROWS_SHOWN = 50
MAX_OBSERVATION_CHARS = 12_000

TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="search",
        description="Search the company knowledge base. Returns numbered sources `[N] title` with their text.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "a self-contained query"}},
            "required": ["query"],
        },
    ),
    ToolSpec(
        name="graph",
        description="Records linked to a record (Jira links, explicit links), up to depth 2.",
        parameters={
            "type": "object",
            "properties": {"record_id": {"type": "integer"}, "depth": {"type": "integer", "minimum": 1, "maximum": 2}},
            "required": ["record_id"],
        },
    ),
    ToolSpec(
        name="sql",
        description="One read-only SELECT over the documented knowledge views; returns rows.",
        parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
)
TOOL_NAMES = tuple(spec.name for spec in TOOL_SPECS)


class KnowledgeTools:
    """Dispatches a tool call by name to the KS primitive, under ``identity`` (the owner's)."""

    specs = TOOL_SPECS

    def __init__(self, identity, ks: Any = None):
        if ks is None:
            ks = facade
        self.identity = identity
        self.ks = ks
        # every source a search showed, by its marker: numbered on across the run's searches, so
        # an [N] of the output names one source whichever search showed it
        self.sources: dict[int, dict] = {}
        self._handlers: dict[str, Callable[[dict], str]] = {
            "search": self._search,
            "graph": self._graph,
            "sql": self._sql,
        }

    def call(self, call: ToolCall) -> str:
        """The observation for one tool call (text; errors included as text)."""
        handler = self._handlers.get(call.name)
        if handler is None:
            return f"error: unknown tool {call.name!r}; available: {', '.join(TOOL_NAMES)}"
        try:
            observation = handler(dict(call.arguments or {}))
        except ApplicationError as exc:
            return f"error ({exc.code}): {exc.detail}"
        except (KeyError, TypeError, ValueError) as exc:
            return f"error (bad_arguments): {exc!r}"
        except Exception as exc:  # a KS failure is an observation; the run itself goes on
            logger.exception("agent tool %s failed", call.name)
            return f"error (tool_failed): {type(exc).__name__}"
        return observation[:MAX_OBSERVATION_CHARS]

    def _search(self, args: dict) -> str:
        query = str(args["query"]).strip()
        if not query:
            raise ValueError("query is empty")
        result = self.ks.search(query, self.identity, SEARCH_K)
        # Withheld records are coordinates only (source system), never their id, title or text.
        hidden = ""
        if result.withheld:
            systems = sorted({w.source_system for w in result.withheld})
            hidden = f"\n\n(Some relevant records exist that the owner may not see; sources: {', '.join(systems)}.)"
        if not result.candidates:
            return ("The knowledge base is empty." if result.is_empty else "Nothing found for this query.") + hidden
        first = len(self.sources) + 1
        sources = [
            ContextSource(i, f"{c.title} (record {c.record_id}, {c.source_system})", c.text)
            for i, c in enumerate(result.candidates, start=first)
        ]
        for i, c in enumerate(result.candidates, start=first):
            self.sources[i] = {
                "marker": i,
                "record_id": c.record_id,
                "title": c.title,
                "url": c.url,
                "source_system": c.source_system,
                "chunk_text": c.text,
            }
        return format_context(sources) + hidden

    def cited(self, output: str) -> list[dict]:
        """The sources the output's [N] markers name (outside code), in marker order."""
        markers = {int(n) for n in re.findall(r"\[(\d{1,3})\]", re.sub(r"```[\s\S]*?```|`[^`\n]*`", "", output))}
        return [self.sources[n] for n in sorted(markers) if n in self.sources]

    def _graph(self, args: dict) -> str:
        depth = max(1, min(2, int(args.get("depth", 1))))
        result = self.ks.graph(int(args["record_id"]), self.identity, depth)
        if not result.nodes:
            return f"No linked records visible for record {result.root_record_id}."
        return "\n".join(
            f"- record {n.record_id} «{n.title}» ({n.source_system}), {n.link_type} via {n.via_record_id}, depth {n.depth}"
            for n in result.nodes
        )

    def _sql(self, args: dict) -> str:
        result = self.ks.sql(str(args["query"]), self.identity)
        lines = [" | ".join(result.columns)]
        lines += [
            " | ".join(json.dumps(v, ensure_ascii=False, default=str) for v in row)
            for row in result.rows[:MAX_SQL_ROWS_SHOWN]
        ]
        if result.truncated or len(result.rows) > MAX_SQL_ROWS_SHOWN:
            lines.append("(truncated)")
        if not result.rows:
            lines.append("(no rows)")
        return "\n".join(lines)
