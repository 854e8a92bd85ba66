"""Layered prompt of an agent run (AE-LOOP): platform prompt → engine instructions → the
agent's instructions → tool specs. Pure: the caller passes the layers in."""

from __future__ import annotations

from achilles.llm import Message, ToolSpec
from agents.tools import TOOL_SPECS

DEFAULT_PLATFORM_PROMPT = (
    "You are an assistant of the company's knowledge platform Achilles. Answer from the company's "
    "knowledge only, cite sources with their [N] markers, and say plainly when nothing was found."
)

ENGINE_INSTRUCTIONS = (
    "You are running as a background agent, with no one to ask follow-up questions. Work in steps: "
    "think, call a tool (search, graph, sql) when you need data, read the observation, repeat, then "
    "write the final report as plain text without tool calls. The tools run with the rights of the "
    "agent's owner. If the knowledge base has no data for the task, say so honestly instead of guessing."
)


EMPTY_KNOWLEDGE_NOTE = (
    "The knowledge base is empty: there is no company data to search yet, so the knowledge tools are "
    "not available. Report honestly that there is no data for the task; do not answer from memory."
)


def compose_messages(*, platform_prompt: str, agent_instructions: str, knowledge_empty: bool = False) -> list[Message]:
    """The opening messages of a run, layer by layer: the system message carries the platform
    prompt (settings override, else the built-in default) then the engine instructions; the
    agent's instructions are the task (user message); the tool specs follow as the ``tools`` of
    every model call (``tool_specs()``). On an empty knowledge base the system message says so."""
    layers = [(platform_prompt or "").strip() or DEFAULT_PLATFORM_PROMPT, ENGINE_INSTRUCTIONS]
    if knowledge_empty:
        layers.append(EMPTY_KNOWLEDGE_NOTE)
    system = "\n\n".join(layers)
    task = agent_instructions.strip() or "(no instructions)"
    return [Message(role="system", content=system), Message(role="user", content=task)]


def tool_specs(*, knowledge_empty: bool = False) -> tuple[ToolSpec, ...]:
    """The locked tool layer: the three KS primitives (an owner cannot switch them off) — but not on
    an empty knowledge base, where there is nothing for them to find (AE-TOOLS: «locked» is not
    "present whatever the state of the base"; the run still starts)."""
    return () if knowledge_empty else TOOL_SPECS
