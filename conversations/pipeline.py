"""The turn pipeline (QE-1…QE-16): one chat turn as an async stream of events.

    prepare_turn → Turn.events():
      tool set → layered prompt → round 1 (tools) → [tools in parallel: cache gate → KS search,
      web search] → order and cut → pack under the window budget → round 2 (no tools), released
      sentence by sentence through the support check — or the engine's own «не нашёл» →
      withheld hint → citations → finalize (message, trace, citations) → access signals → done

Round 1's text is held back while ``search_knowledge`` is offered, until the model has written a
whole sentence with no tool call announced: the turn is then a conversation turn, the held text is
released and the rest streams as generated (a tool call that still follows is refused and
logged). Text that ends the round beside a search call before that is dropped, never shown. On a grounding turn only sentences that pass ``conversations.support`` are streamed and
stored; the others stay in the trace with the reason (``ungrounded_sentences``).

Both transports (SSE, websocket) drive ``Turn.events()``. When the client goes away the stream
is cancelled or closed; the message is then finalized ``interrupted`` with the text produced so
far, in a shielded step, and the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

from achilles import metrics
from achilles.errors import INTERNAL_ERROR_DETAIL, ApplicationError, as_application_error
from achilles.llm import (
    ChatProvider,
    Message,
    TextDelta,
    ToolCall,
    ToolCalls,
    ToolSpec,
    Usage,
    estimate_input_tokens,
    estimate_tokens,
)
from conversations import services
from conversations.choices import MessageState
from conversations.citations import MarkerNumbers, answer_access_records, build_citations
from conversations.deps import (  # noqa: F401  (re-exported: the engine's public names)
    DatabaseTurnStore,
    EngineDeps,
    Finalized,
    TurnStore,
    engine_deps,
    set_engine_deps,
)
from conversations.events import DoneEvent, ErrorEvent, Event, TokenEvent  # noqa: F401
from conversations.grounding import author_user_id, engine_answer, withheld_hint
from conversations.knowledge_client import KnowledgeClient
from conversations.packing import PackedSource, fit_history, pack_context
from conversations.prompt import round_one_messages, system_prompt, tool_result_messages
from conversations.ranking import order_and_cut
from conversations.spans import OFF, Clock
from conversations.support import GroundingGate, MeaningSignal, SentenceSplitter
from conversations.tools import ToolPlan, plan_tool_round, tool_set
from conversations.trace import GroundingOutcome, TraceDraft
from conversations.websearch import WebResult, WebSearchProvider
from knowledge.facade import Identity, SearchResult

logger = logging.getLogger(__name__)

WEB_RESULTS_LIMIT = 5


# --- the turn ---------------------------------------------------------------------------------


async def prepare_turn(
    *,
    admit: Callable[[], Any],
    content: str,
    conversation_id=None,
    identity: Identity | None = None,
    deps: EngineDeps | None = None,
    clock: Clock = OFF,
    regenerate_of: int | None = None,
    edit_of: int | None = None,
) -> Turn:
    """Validate and start a turn (raises ApplicationError: 404 foreign thread, 422 bad input).

    ``admit`` (sync, may raise ApplicationError) says who asks, first thing in the start's own
    step: the SSE view checks the credentials there (no thread hop of their own); the websocket,
    whose session was checked already, and tests pass ``lambda: user``.
    ``identity`` defaults to that user's; it is never taken from anything the model says.
    ``clock`` (bench only, ``conversations.spans``) charges the turn's CPU to its phases.
    ``regenerate_of`` (an answer's id) answers its question again beside it; ``edit_of`` (a
    question's id) asks ``content`` as a new version of that question (``services.turn_start``).
    """
    rewrite = {
        name: value for name, value in (("regenerate_of", regenerate_of), ("edit_of", edit_of)) if value is not None
    }
    prepared_from = time.monotonic()
    deps = deps or engine_deps()
    # Shielded: the start step stores the user's message; a client leaving meanwhile must not leave
    # that message unanswered (the step finishes in its thread whatever happens to this task).
    starting = asyncio.ensure_future(
        deps.start(
            admit=admit, content=content, conversation_id=conversation_id, identity=identity, rewrite=rewrite or None
        )
    )
    try:
        start, identity, knowledge_empty = await asyncio.shield(starting)
    except asyncio.CancelledError:
        await asyncio.shield(_close_abandoned_start(starting, content, deps))
        raise
    turn = Turn(start=start, identity=identity, content=(start.content or content).strip(), deps=deps)
    turn.knowledge_empty = knowledge_empty
    turn.clock = clock
    turn.timings["prepare_ms"] = _ms(prepared_from)
    return turn


async def _close_abandoned_start(starting: asyncio.Future, content: str, deps: EngineDeps) -> None:
    """The client left while the turn was starting: once the start is done, close the turn with an
    empty ``interrupted`` reply, so the thread never holds a question without an answer row."""
    try:
        start, identity, _ = await starting
    except Exception:  # the start failed (404, 422, …): it stored nothing
        return
    await Turn(start=start, identity=identity, content=(start.content or content).strip(), deps=deps).close_unstarted()


@dataclass
class _Round:
    first_event_ms: float | None = None
    calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    input_estimate: int = 0
    text: list[str] = field(default_factory=list)


class Turn:
    def __init__(self, *, start: services.TurnStart, identity: Identity, content: str, deps: EngineDeps):
        self.start = start
        self.identity = identity
        self.content = content
        self.deps = deps
        self.conversation_id = start.conversation_id
        self.parts: list[str] = []
        self.meaning: MeaningSignal | None = None  # the support check's embedder signal, read with the search
        self.rounds: list[_Round] = []
        self.trace: TraceDraft | None = None
        self.finalized = False
        self.started = False  # events() began: from then on it finalizes the turn itself
        self.message_id: int | None = None
        self._finalize_task: asyncio.Future | None = None
        self.timings: dict[str, float] = {}
        self.clock: Clock = OFF
        self.knowledge_empty: bool | None = None  # read with the start when the deps allow it

    # -- public --

    async def close_unstarted(self) -> None:
        """Finalize ``interrupted`` a turn whose stream never started (its client left first)."""
        if not self.started and not self.finalized:
            await self._finalize_interrupted()

    async def events(self) -> AsyncIterator[Event]:
        self.started = True
        began, first_text_ms, outcome = time.monotonic(), None, "cancelled"
        try:
            async with aclosing(self._run()) as run:
                async for event in run:
                    if first_text_ms is None and isinstance(event, TokenEvent):
                        # the first text released: on a grounded turn, the first sentence the gate passed
                        first_text_ms = _ms(began)
                    elif isinstance(event, DoneEvent | ErrorEvent):
                        outcome = "complete" if isinstance(event, DoneEvent) else "error"
                    left = self.clock.switch("relay")
                    yield event
                    self.clock.switch(left)
        except (asyncio.CancelledError, GeneratorExit):
            # The client is gone: finalize what was produced, whatever cancels us next.
            await asyncio.shield(self._finalize_interrupted())
            raise
        finally:
            metrics.chat_turn_record(outcome, first_text_ms)

    # -- steps --

    async def _run(self) -> AsyncIterator[Event]:
        started = self._started = time.monotonic()
        spec = self.start.model
        settings = self.start.settings
        try:
            provider = self.deps.chat_provider(spec)
            knowledge_empty = self.knowledge_empty
            if knowledge_empty is None:
                knowledge_empty = await self.deps.is_empty()
            web_provider = self.deps.web_search(settings) if settings.web_search_enabled else None
            tools = tool_set(knowledge_empty=knowledge_empty, web_search_enabled=web_provider is not None)
            system = Message("system", system_prompt(platform_prompt=settings.platform_prompt, tools=tools))
            current = Message("user", self.content)
            fit = fit_history(
                window=spec.context_window,
                reserve=settings.answer_reserve_tokens,
                system=system,
                history=self.start.history,
                current=current,
                tool_specs_tokens=_tools_tokens(tools),
            )
            messages = round_one_messages(system=system.content, history=fit.kept, content=self.content)

            round_one = _Round()
            self.clock.switch("model")
            # While the model may still call search_knowledge, its text is held: text beside a
            # search call is never shown nor stored (it is not grounded in anything). Once the
            # model has written a whole sentence with no tool call announced (the next sentence
            # has begun), the turn is a conversation turn: the held text is released and the rest
            # streams as generated; a search call that still follows is refused.
            hold = any(t.name == "search_knowledge" for t in tools)
            splitter = SentenceSplitter() if hold else None
            async with aclosing(self._stream_round(provider, messages, tools, round_one, release=False)) as stream:
                async for text in stream:
                    if splitter is not None and (splitter.feed(text) and not round_one.calls):
                        hold, splitter = False, None
                        held = "".join(round_one.text)
                        self.parts.append(held)
                        self.timings["round1_released_ms"] = _ms(started)
                        yield TokenEvent(held)
                    elif not hold:
                        self.parts.append(text)
                        yield TokenEvent(text)
            self.timings["round1_ms"] = _ms(started)
            self.timings["round1_first_event_ms"] = round_one.first_event_ms

            calls = round_one.calls
            if "round1_released_ms" in self.timings and calls:
                # The user has seen this turn's text already: it cannot become a grounded answer.
                logger.warning(
                    "tool calls after a streamed conversational sentence refused: %s", [c.name for c in calls]
                )
                calls = ()
            plan = plan_tool_round(calls, tools)
            if hold and plan.search is None:
                for text in round_one.text:
                    self.parts.append(text)
                    yield TokenEvent(text)
            elif hold and round_one.text:
                self.timings["round1_text_dropped_chars"] = len("".join(round_one.text))
            outcome = GroundingOutcome()
            if plan.is_grounding:
                grounding = self._grounding(provider, messages, round_one, plan, fit.remaining, web_provider)
                async with aclosing(grounding) as steps:
                    async for step in steps:
                        if isinstance(step, GroundingOutcome):
                            outcome = step
                        else:
                            yield step
            self.timings["total_ms"] = _ms(started)
            self.clock.switch("finalize")
            message = await self._finalize(MessageState.COMPLETE, outcome, signal_access=True)
        except ApplicationError as exc:
            logger.warning("chat turn failed: %s (%s)", exc.detail, exc.code)
            detail, code = exc.detail, exc.code
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as exc:
            error = as_application_error(exc)  # PostgreSQL or Redis away: their 503 code, not a crash
            if error is None:
                logger.exception("chat turn crashed")
                detail, code = INTERNAL_ERROR_DETAIL, "internal_error"
            else:
                logger.warning("chat turn failed: %s (%s): %s", error.detail, error.code, exc)
                detail, code = error.detail, error.code
        else:
            hint = outcome.hint.as_dict() if outcome.hint is not None else None
            yield DoneEvent(
                message_id=message.id,
                conversation_id=self.conversation_id,
                citations=[
                    {**c.as_dict(), "source_label": message.source_labels.get(c.source_system, c.source_system)}
                    for c in outcome.citations
                ],
                withheld_hint=hint,
                tokens_used=message.tokens_used,
                model=spec.name,
            )
            return
        # Every failure ends with an error event, whether or not the answer row could be written
        # (a thread deleted meanwhile has no row to take it; the database may stay away too long).
        message_id = await self._finalize_failed()
        if message_id is None:
            await self._abandon()
        yield ErrorEvent(detail, code, message_id, self.conversation_id)

    async def _stream_round(
        self,
        provider: ChatProvider,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        sink: _Round,
        *,
        release: bool = True,
    ) -> AsyncIterator[str]:
        """Yields the round's text deltas; with ``release`` they are also the answer's (``parts``),
        otherwise the caller decides what of it the client gets."""
        self.rounds.append(sink)
        sink.input_estimate = estimate_input_tokens(messages, tools)
        reserve = self.start.settings.answer_reserve_tokens
        started = time.monotonic()
        async with aclosing(provider.stream(messages, tools, reserve)) as events:
            async for event in events:
                if sink.first_event_ms is None:
                    sink.first_event_ms = _ms(started)
                if isinstance(event, TextDelta):
                    if event.text:
                        sink.text.append(event.text)
                        if release:
                            self.parts.append(event.text)
                        yield event.text
                elif isinstance(event, ToolCalls):
                    sink.calls = tuple(event.calls)
                elif isinstance(event, Usage):
                    sink.usage = event

    async def _grounding(
        self,
        provider,
        messages,
        round_one: _Round,
        plan: ToolPlan,
        available: int,
        web_provider: WebSearchProvider | None,
    ) -> AsyncIterator[TokenEvent | GroundingOutcome]:
        """Yields the answer's TokenEvents, then its GroundingOutcome (last)."""
        settings = self.start.settings
        t0 = time.monotonic()
        self.clock.switch("ks")
        search_result, cache_hit, web_results = await self._run_tools(plan, web_provider)
        self.timings["tools_ms"] = _ms(t0)
        candidates = search_result.candidates if search_result else ()
        withheld = search_result.withheld if search_result else ()
        kept, cut_by_k = order_and_cut(candidates, settings.retrieval_top_k)
        sources = [
            PackedSource(
                marker=0,
                record_id=c.record_id,
                chunk_id=c.chunk_id,
                title=c.title,
                url=c.url,
                source_system=c.source_system,
                text=c.text,
                rank=c.rank,
                score=c.score,
            )
            for c in kept
        ]
        sources += [
            PackedSource(
                marker=0,
                record_id=None,
                chunk_id=None,
                title=w.title,
                url=w.url,
                source_system="web",
                text=w.snippet,
                rank=len(kept) + i + 1,
            )
            for i, w in enumerate(web_results)
        ]
        # The tool-call message of round 1 also costs window space.
        packed, cut_by_budget = pack_context(sources, available - _calls_tokens(round_one.calls))
        knowledge_packed = [s for s in packed if s.record_id is not None]
        web_packed = [s for s in packed if s.record_id is None]

        contacts = {}
        authors = {author_user_id(w.author_principal_id) for w in withheld}
        authors.discard(None)
        if authors:
            contacts = await self.deps.contacts(authors)
        hint = withheld_hint(withheld, contacts)

        self.timings["cut_by_top_k"] = len(cut_by_k)
        self.timings["cut_by_budget"] = len(cut_by_budget)
        self.trace = TraceDraft(
            standalone_query=plan.search_query or plan.web_query or "",
            identity=self.identity,
            candidates=tuple(candidates),
            packed=tuple(packed),
            withheld=tuple(withheld),
            web_results=tuple(web_results),
            cache_hit=cache_hit,
        )

        own = engine_answer(packed_any=bool(packed), withheld=withheld)
        answer = ""
        if own is None:
            transcript = [
                *messages,
                *tool_result_messages(
                    calls=round_one.calls,
                    search_call=plan.search,
                    web_call=plan.web,
                    knowledge=knowledge_packed,
                    web=web_packed,
                ),
            ]
            round_two = _Round()
            self.clock.switch("model")
            gate = GroundingGate(
                sources={s.marker: s.text for s in packed},
                source_urls=[s.url for s in packed if s.url],
                meaning=self.meaning,
            )
            timings = self.timings
            t1 = time.monotonic()
            gate_seconds = 0.0
            # The reader sees the answer's own marker numbers, 1, 2, … in order of first use.
            numbers = MarkerNumbers(frozenset(s.marker for s in packed))
            shown: list[str] = []

            def released(pieces: list[str]):
                for piece in pieces:
                    if "first_release_ms" not in timings:
                        timings["first_release_ms"] = _ms(self._started)
                    piece = numbers.renumber(piece)
                    shown.append(piece)
                    self.parts.append(piece)
                    yield TokenEvent(piece)

            # No tools in round 2: the model must answer; a second tool round never happens.
            # Each sentence is released only once the support check passed it.
            async with aclosing(self._stream_round(provider, transcript, (), round_two, release=False)) as stream:
                async for text in stream:
                    g0 = time.monotonic()
                    self.clock.switch("gate")
                    # The embedder's signal computes off the event loop (tens of ms a clause); only a
                    # delta that may end a sentence can reach it.
                    pieces = await asyncio.to_thread(gate.feed, text) if gate.embeds(text) else gate.feed(text)
                    self.clock.switch("model")
                    gate_seconds += time.monotonic() - g0
                    for event in released(pieces):
                        yield event
            g0 = time.monotonic()
            pieces = await asyncio.to_thread(gate.flush) if gate.meaning is not None else gate.flush()
            gate_seconds += time.monotonic() - g0
            for event in released(pieces):
                yield event
            timings["round2_ms"] = _ms(t1)
            timings["round2_first_token_ms"] = round_two.first_event_ms
            timings["gate_ms"] = round(gate_seconds * 1000, 2)
            if gate.meaning is not None and gate.meaning.clauses:
                timings["meaning_clauses"] = gate.meaning.clauses
                timings["meaning_ms"] = round(gate.meaning.seconds * 1000, 2)
            self.trace = replace(self.trace, ungrounded=tuple(gate.rejected))
            answer = "".join(shown)
            if not answer:
                # Nothing the model wrote is supported by the packed context: the engine's own answer.
                own = engine_answer(packed_any=False, withheld=withheld)
        if own is not None:
            # Nothing to ground on: the engine answers, not the model (no guess from memory).
            self.parts.append(own)
            yield TokenEvent(own)
        citations = build_citations(numbers.sources(packed), answer) if own is None else []
        if hint is not None:
            tail = "\n\n" + hint.text
            self.parts.append(tail)
            yield TokenEvent(tail)
        yield GroundingOutcome(citations=tuple(citations), hint=hint)

    async def _run_tools(self, plan: ToolPlan, web_provider: WebSearchProvider | None):
        settings = self.start.settings

        async def knowledge_search() -> tuple[SearchResult | None, bool, MeaningSignal | None]:
            if plan.search is None:
                return None, False, None
            query = plan.search_query

            # Identity is the session's, never anything from the tool call's arguments.
            return await self.deps.search(
                query=query, identity=self.identity, k=settings.retrieval_top_k, ttl=settings.cache_ttl_seconds
            )

        async def web_search() -> list[WebResult]:
            if plan.web is None or web_provider is None:
                return []
            try:
                return await web_provider.search(plan.web_query, WEB_RESULTS_LIMIT)
            except ApplicationError as exc:  # the web is optional: answer from the knowledge base alone
                logger.warning("web search failed: %s", exc.detail)
                return []

        (search_result, cache_hit, self.meaning), web_results = await asyncio.gather(knowledge_search(), web_search())
        return search_result, cache_hit, web_results

    # -- finalize --

    def _tokens_split(self) -> tuple[int, int]:
        """(input, output) of the whole turn: each round's ``Usage``, or for an interrupted round
        the local estimate of what it consumed so far."""
        inputs = outputs = 0
        for r in self.rounds:
            if r.usage is not None:
                inputs += r.usage.input_tokens
                outputs += r.usage.output_tokens
            else:
                inputs += r.input_estimate
                outputs += estimate_tokens("".join(r.text))
        return inputs, outputs

    def _tokens_used(self) -> int:
        return sum(self._tokens_split())

    def _finalize_fields(self, state: str, outcome: GroundingOutcome) -> dict:
        # The trace takes the turn's timings as they stand (an interrupted turn's too).
        trace = replace(self.trace, timings=dict(self.timings)) if self.trace is not None else None
        return {
            "conversation_id": self.conversation_id,
            "content": "".join(self.parts),
            "model_name": self.start.model.name,
            "tokens_used": self._tokens_used(),
            "tokens_split": self._tokens_split(),
            "state": state,
            "citations": outcome.citations,
            "trace": trace,
            "withheld_hint": outcome.hint,
            "question_id": self.start.user_message_id,
        }

    async def _finalize(
        self, state: str, outcome: GroundingOutcome | None = None, *, signal_access: bool = False
    ) -> Finalized:
        """Store the answer; with ``signal_access`` its cited records' access signals go in the
        same step, once the answer is stored."""
        outcome = outcome or GroundingOutcome()
        records = answer_access_records(outcome.citations) if signal_access else []
        after = _access_signals(self.deps.knowledge, records, self.identity) if records else None
        # Shielded and remembered: a client leaving mid-write must not cause a second finalize.
        self._finalize_task = asyncio.ensure_future(
            self.deps.finalize(after=after, **self._finalize_fields(state, outcome))
        )
        message = await asyncio.shield(self._finalize_task)
        self.finalized = True
        self.message_id = message.id
        return message

    async def _finalize_failed(self) -> int | None:
        """Write the ``failed`` answer row once; never raises. A finalize that was already tried
        (it is what failed: thread deleted, database away past the retries) is not tried again."""
        if self._finalize_task is not None:
            if (
                self._finalize_task.done()
                and not self._finalize_task.cancelled()
                and self._finalize_task.exception() is None
            ):
                return self._finalize_task.result().id
            return None
        try:
            return (await self._finalize(MessageState.FAILED)).id
        except ApplicationError as exc:
            logger.warning("the failed turn's answer was not stored: %s (%s)", exc.detail, exc.code)
        except Exception:
            logger.exception("could not store the failed turn's answer")
        return None

    async def _finalize_interrupted(self) -> None:
        try:
            if self._finalize_task is None:
                self._finalize_task = asyncio.ensure_future(
                    self.deps.finalize(**self._finalize_fields(MessageState.INTERRUPTED, GroundingOutcome()))
                )
            message = await self._finalize_task
            self.finalized = True
            self.message_id = message.id
        except ApplicationError as exc:  # the thread was deleted meanwhile: nothing left to answer
            logger.info("interrupted turn not stored: %s", exc.detail)
        except Exception:
            logger.exception("could not finalize an interrupted turn")
            await self._abandon()

    async def _abandon(self) -> None:
        """The answer row could not be written (the database stayed away past the retries): say the
        turn is over, so the thread's next turn closes the question instead of waiting out its answer
        window (409 ``turn_in_progress``). Never raises."""
        try:
            await self.deps.abandon(self.start)
        except Exception:
            logger.warning("could not mark the unanswered turn as over", exc_info=True)


def _access_signals(knowledge: KnowledgeClient, record_ids: Sequence[int], identity: Identity) -> Callable[[int], None]:
    """The answer's access signals, run in the finalize's step once the answer is stored (given its
    id). Cited records count once per answer; retrieved-but-unused candidates never do (QE-11). A
    failed signal is logged, never raised: the answer is stored already."""
    record_ids = tuple(record_ids)

    def signal(message_id: int) -> None:
        for record_id in record_ids:
            try:
                knowledge.register_access(record_id, identity, "answer", str(message_id))
            except Exception:
                logger.exception("access signal for record %s failed", record_id)

    return signal


def _tools_tokens(tools: Sequence[ToolSpec]) -> int:
    return estimate_input_tokens([], tools)


def _calls_tokens(calls: Sequence[ToolCall]) -> int:
    return estimate_input_tokens([Message("assistant", "", tool_calls=tuple(calls))])


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 2)
