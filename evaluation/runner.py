"""Running the question set through the chat engine: the demo data loaded into the current
database, then each question as a new conversation of the ``demo`` user, on the same turn the web
page and ``POST /api/chat`` drive (``conversations.pipeline.prepare_turn`` → ``Turn.events()``),
with the real Knowledge Store, cache and model of the allow-list."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import yaml
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import transaction

from achilles.models import AllowedModel, User
from evaluation.scoring import Card, Outcome, Question

QUESTIONS = Path(__file__).resolve().parent / "questions.yaml"


def questions_load(path: Path = QUESTIONS, *, ids: Iterable[str] | None = None) -> list[Question]:
    """The question set (``ids``: only those, in the file's order)."""
    items = [Question.from_dict(d) for d in yaml.safe_load(path.read_text(encoding="utf-8"))]
    seen: set[str] = set()
    for q in items:
        if q.id in seen:
            raise ValueError(f"question id {q.id} twice")
        seen.add(q.id)
    if ids is not None:
        wanted = set(ids)
        items = [q for q in items if q.id in wanted]
    return items


def demo_jira_to_knowledge() -> int:
    """The mirrored demo project AURORA into the Knowledge Store, now (``make run``'s Celery worker
    does it after ``demo_hub``; here nothing else would)."""
    from hub.knowledge_feed import mirror_to_knowledge  # noqa: PLC0415 — only when the hub's demo is wanted
    from hub.models import MirrorIssue  # noqa: PLC0415

    return mirror_to_knowledge(issue_ids=list(MirrorIssue.objects.values_list("pk", flat=True)))


def demo_confluence_to_knowledge() -> str:
    """The demo Confluence space KB (the emulator, on a free loopback port for the time of one
    sync) through the Confluence connector, synchronously: the same run ``make run`` queues."""
    from emulators.confluence import serve  # noqa: PLC0415 — a development stand-in, not the platform
    from emulators.confluence.demo import SYNC_TOKEN, build_demo  # noqa: PLC0415
    from knowledge.connectors import services  # noqa: PLC0415
    from knowledge.connectors.models import Connector  # noqa: PLC0415
    from knowledge.connectors.sync import connector_run  # noqa: PLC0415

    server = serve(build_demo(), host="127.0.0.1", port=0)
    try:
        existing = Connector.objects.filter(name="Confluence (демо)").first()
        fields = services.ConnectorFields(
            kind="confluence", name="Confluence (демо)", base_url=server.url, token=SYNC_TOKEN, spaces=["KB"]
        )
        if existing is None:
            connector = services.connector_create(actor="make eval", fields=fields)
        else:
            connector = services.connector_update(
                actor="make eval",
                connector_id=existing.pk,
                fields=services.ConnectorFields(base_url=server.url, token=SYNC_TOKEN),
            )
        run = services.run_request(connector_id=connector.pk)
        return connector_run(run_id=run.pk)
    finally:
        server.stop()


def cache_namespace_clear() -> None:
    """Empty this run's cache namespace (``TEST_DATABASE_NAME=eval``): a fresh database starts its
    content generation again, so a previous run's cached search results would match its keys."""
    import redis  # noqa: PLC0415
    from django.conf import settings  # noqa: PLC0415

    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=500))
    if keys:
        client.delete(*keys)


def demo_load(*, stdout=None) -> None:
    """Everything ``make run`` shows the demo user: accounts, the allow-list, the corpus, the hub's
    project AURORA in the Knowledge Store, and the Confluence space KB."""
    call_command("demo_data", stdout=stdout)
    demo_jira_to_knowledge()
    demo_confluence_to_knowledge()


def chat_models() -> list[AllowedModel]:
    """The allow-list's chat models, the default first."""
    return list(AllowedModel.objects.filter(kind="chat").order_by("-is_default", "name"))


@transaction.atomic
def default_model_set(model: AllowedModel) -> None:
    """Make ``model`` the default chat model: a new conversation generates with the default."""
    AllowedModel.objects.filter(kind="chat", is_default=True).exclude(pk=model.pk).update(is_default=False)
    AllowedModel.objects.filter(pk=model.pk).update(is_default=True)


def _cards(citations: Sequence[dict]) -> tuple[Card, ...]:
    """The source cards the chat page shows: one per marker, with the passage it points to."""
    cards = []
    for c in citations:
        title, url = c.get("title") or "", c.get("url") or ""
        passages = c.get("passages") or [
            {"marker": m, "text": c.get("chunk_text") or ""} for m in (c.get("markers") or [c.get("rank")])
        ]
        cards += [Card(title=title, url=url, passage=p.get("text") or "", markers=(p["marker"],)) for p in passages]
    return tuple(sorted(cards, key=lambda card: card.markers))


def ask(user: User, question: str) -> Outcome:
    """One question as a new conversation; what the client received, and when its first sentence came."""
    from conversations.pipeline import prepare_turn  # noqa: PLC0415 — Django must be set up first

    async def go() -> Outcome:
        started = time.perf_counter()
        first: float | None = None
        text: list[str] = []
        cards: tuple[Card, ...] = ()
        hint = None
        error = None
        turn = await prepare_turn(admit=lambda: user, content=question)
        async for event in turn.events():
            if event.name == "token":
                if first is None:
                    first = (time.perf_counter() - started) * 1000
                text.append(event.text)
            elif event.name == "done":
                cards = _cards(event.citations)
                hint = event.withheld_hint
            elif event.name == "error":
                error = f"{event.code}: {event.detail}"
        return Outcome(text="".join(text), cards=cards, hint=hint, first_sentence_ms=first, error=error)

    return async_to_sync(go)()


def run_questions(
    user: User, questions: Sequence[Question], *, progress: Callable[[Question, Outcome], None] | None = None
) -> list[tuple[Question, Outcome]]:
    results = []
    for question in questions:
        outcome = ask(user, question.question)
        if progress is not None:
            progress(question, outcome)
        results.append((question, outcome))
    return results
