"""Layered prompt of an agent run (AE-LOOP): platform prompt → engine instructions → the
agent's instructions → tool specs. Pure: the caller passes the layers in."""

from __future__ import annotations

from achilles.llm import Message, ToolSpec

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


def compose_messages(*, platform_prompt: str, agent_instructions: str) -> list[Message]:
    """The opening messages of a run, layer by layer: the system message carries the platform
    prompt (settings override, else the built-in default) then the engine instructions; the
    agent's instructions are the task (user message); the tool specs follow as the ``tools`` of
    every model call (``tool_specs()``)."""
    system = "\n\n".join([(platform_prompt or "").strip() or DEFAULT_PLATFORM_PROMPT, ENGINE_INSTRUCTIONS])
    task = agent_instructions.strip() or "(no instructions)"
    return [Message(role="system", content=system), Message(role="user", content=task)]


def tool_specs() -> tuple[ToolSpec, ...]:
    """The locked tool layer: always the three KS primitives, whatever the state of KS."""
    from agents.tools import TOOL_SPECS

    return TOOL_SPECS
