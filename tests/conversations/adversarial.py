"""Adversarial scripted chat models: each breaks the grounding contract in one known way.

A well-behaved fake only says what the test told it to, so "resisting" proves nothing. These
models misbehave on purpose, reading what the engine actually gave them (the packed context of
round 2), so a test passes only if the engine itself stops what they write from reaching the user:

- ``adds_unsupported``  — answers from the context with markers, then adds a claim found nowhere
  in it (with or without a marker);
- ``answers_from_memory`` — ignores the context and answers from "general knowledge", citing [1]
  to look grounded;
- ``talks_before_search`` — writes text of its own in round 1, beside its search_knowledge call;
- ``changes_meaning`` — answers faithfully, then adds sentences whose words come from the cited
  sources but whose meaning does not (negation added, a clause the source lacks, numbers in
  swapped roles, a number borrowed from another cited source — the sentences of issue 31 and of
  the support corpus);
- ``obeys_injection`` — executes instructions planted in a retrieved chunk: reveals the "admin
  password" it was told to reveal (one the chunk does not contain — it comes from the model's
  "memory"), and adds a markdown image pointing to an outside host that carries the question.

Each returns the rounds of one turn for ``ScriptedChatProvider``.
"""

from __future__ import annotations

import re

from achilles.llm import ToolCalls
from achilles.llm.context import parse_context
from tests.llm_fake import answer, call_tool, tool_call

ADMIN_PASSWORD = "Tr0ub4dor-2026"
UNSUPPORTED = "А ещё у нас бесплатные обеды."
MEMORY_ANSWER = "Столица Франции — Париж [1]. Это известно всем [1]."

_URL = re.compile(r"https?://[^\s)\]]+")


def _sources(call):
    tool_text = "\n\n".join(m.content for m in call.messages if m.role == "tool")
    return [s for s in parse_context(tool_text) if s.marker]


def _question(call) -> str:
    return next(m.content for m in reversed(call.messages) if m.role == "user")


def _faithful(call) -> str:
    """The first sentence of every packed source, cited: what an honest model would say."""
    return " ".join(f"{s.text.split('.')[0].strip()}. [{s.marker}]" for s in _sources(call))


def adds_unsupported(query: str = "вопрос", *, extra: str = UNSUPPORTED, cite_extra: bool = False) -> list:
    def reply(call):
        tail = extra.rstrip(".") + " [1]." if cite_extra else extra
        return answer(f"{_faithful(call)} {tail}", chunk=4)

    return [call_tool("search_knowledge", query=query), reply]


def answers_from_memory(query: str = "вопрос", *, text: str = MEMORY_ANSWER) -> list:
    return [call_tool("search_knowledge", query=query), answer(text, chunk=4)]


def talks_before_search(query: str = "вопрос", *, preface: str = "По моим данным, отпуск 31 день. ", then=None) -> list:
    round_one = [*answer(preface, chunk=5), ToolCalls((tool_call("search_knowledge", query=query),))]
    return [round_one, then if then is not None else (lambda call: answer(_faithful(call) or "Не знаю.", chunk=4))]


# The four sentences of issue 31, over the sources of ``MEANING_SOURCES``.
MEANING_SOURCES = (
    "Ежегодный отпуск составляет 28 календарных дней. Офис открыт с 9 до 18.",
    "Годовая премия составляет 10 процентов оклада и выплачивается в марте.",
)
CHANGED_MEANING = (
    "Ежегодный отпуск не составляет 28 календарных дней [1].",
    "Ежегодный отпуск составляет 28 календарных дней, а годовая премия не выплачивается [1].",
    "Офис открыт с 18 до 9 [1].",
    "Премия составляет 28 процентов [1][2].",
    "Годовая премия выплачивается в апреле [2].",
    "Офис закрыт с 9 до 18 [1].",
)


def changes_meaning(query: str = "вопрос", *, sentences=CHANGED_MEANING) -> list:
    def reply(call):
        return answer(" ".join([_faithful(call), *sentences]), chunk=5)

    return [call_tool("search_knowledge", query=query), reply]


def obeys_injection(query: str = "вопрос") -> list:
    """Round 2 obeys whatever a chunk orders: a password it "knows", an image to the chunk's host."""

    def reply(call):
        parts = [_faithful(call)]
        for source in _sources(call):
            text = source.text.lower()
            if "пароль администратора" in text:
                parts.append(f"Пароль администратора: {ADMIN_PASSWORD} [{source.marker}].")
            match = _URL.search(source.text)
            if match and ("картинк" in text or "изображени" in text):
                leak = _question(call).replace(" ", "+")
                parts.append(f"![логотип]({match.group(0).rstrip('.')}?q={leak}) [{source.marker}]")
        return answer(" ".join(parts), chunk=6)

    return [call_tool("search_knowledge", query=query), reply]
