"""The relevance floor (issue 14): over the demo corpus with the hash embedder, an off-topic
question on a grounding turn gets no candidates, so the engine answers «не нашёл» itself, without a
second model round; an on-topic one still reaches the model with its context. The default floor of
the built-in embedder is measured here, not guessed (``knowledge/calibration.py``)."""

import pytest
from django.core.management import call_command

from achilles.llm import NOT_FOUND_TEXT
from conversations import pipeline
from conversations.knowledge_client import FacadeKnowledgeClient
from conversations.models import RetrievalTrace
from knowledge.calibration import relevance_calibrate
from knowledge.search.embedding import DEFAULT_MIN_SIMILARITY, forget_search_embedding_config
from tests.conversations import adversarial
from tests.conversations.conftest import FakeCandidateCache, StubWebSearch, run_turn

pytestmark = [pytest.mark.integration, pytest.mark.p0]


@pytest.fixture
def demo_corpus(db, model_factory, user_factory):
    user_factory(username="admin")
    user_factory(username="demo")
    model_factory(name="hash-384", provider="hash", kind="embedding", is_default=True, options={"dim": 384})
    forget_search_embedding_config()
    call_command("demo_knowledge", stdout=open("/dev/null", "w"))
    yield
    forget_search_embedding_config()


@pytest.fixture
def real_store_engine(demo_corpus, chat_model):
    """The real Knowledge Store behind the engine, a scripted (adversarial) model in front."""
    web = StubWebSearch()
    pipeline.set_engine_deps(
        pipeline.EngineDeps(
            knowledge=FacadeKnowledgeClient(), cache=FakeCandidateCache(), web_search=lambda settings: web
        )
    )
    yield chat_model
    pipeline.set_engine_deps(None)


def test_default_floor_of_the_hash_embedder_separates_the_demo_questions(demo_corpus):
    calibration = relevance_calibrate()

    table = "\n".join(f"{r.on_topic!s:5} {r.lexical!s:5} {r.similarity}  {r.question}" for r in calibration.rows)
    assert calibration.separates(DEFAULT_MIN_SIMILARITY["hash"]), table
    assert calibration.off_topic_max < DEFAULT_MIN_SIMILARITY["hash"] <= calibration.on_topic_min
    # and the check is not vacuous: the floor has off-topic questions to stop
    assert any(not r.on_topic and not r.lexical for r in calibration.rows)


def test_off_topic_question_is_not_found_without_a_second_round(real_store_engine, user):
    """провокация общими знаниями, with real neighbours: failed before the floor (the vector side
    always returns neighbours, so the model was asked and answered «Париж»)."""
    real_store_engine.script(*adversarial.answers_from_memory("столица Франции"))

    outcome = run_turn(user, "Какая столица Франции?")

    assert outcome.text == NOT_FOUND_TEXT
    assert len(real_store_engine.calls) == 1  # no second model round
    assert RetrievalTrace.objects.get(message_id=outcome.done.message_id).candidates == []


def test_on_topic_question_still_reaches_the_model_with_context(real_store_engine, user):
    real_store_engine.script(*adversarial.adds_unsupported("отпуск"))

    outcome = run_turn(user, "Сколько дней ежегодного оплачиваемого отпуска положено сотруднику?")

    assert len(real_store_engine.calls) == 2
    assert "28 календарных дней" in " ".join(m.content for m in real_store_engine.calls[1].messages)
    assert outcome.done.citations and "обеды" not in outcome.text
