"""The eval's scoring: facts with alternatives and number spacing, the product's refusal texts,
the withheld hint's tail, citation precision, refusal precision and recall."""

from achilles.llm import NOT_FOUND_TEXT
from evaluation.runner import questions_load
from evaluation.scoring import ONLY_WITHHELD_TEXT, Card, Outcome, Question, figures, judge

VACATION = Question(
    id="v", question="Сколько дней отпуска?", kind="answer", facts=("28 календарных дней",), source="otpusk"
)
NONE = Question(id="n", question="Какая столица Франции?", kind="none")
WITHHELD = Question(id="w", question="План выручки?", kind="withheld", facts=("1,8 млрд",), source="budget")
HINT = {"text": "Есть и релевантные материалы, закрытые для вас правами доступа: источник «files».", "sources": []}


def card(passage: str) -> Card:
    return Card(title="Отпуск", url="https://wiki/hr/otpusk", passage=passage, markers=(1,))


def test_a_fact_matches_across_spacing_case_and_alternatives():
    outcome = Outcome(text="Положено 28\u00a0Календарных дней [1].", cards=(card("28 календарных дней"),))
    verdict = judge(VACATION, outcome)
    assert verdict.correct and verdict.precise_cards == 1
    assert judge(
        Question(id="x", question="?", kind="answer", facts=("1500|полторы",), source="s"), Outcome("1 500 ₽")
    ).facts_found


def test_the_refusal_is_the_products_text_with_or_without_the_hint():
    assert judge(NONE, Outcome(NOT_FOUND_TEXT)).correct
    withheld = judge(WITHHELD, Outcome(f"{ONLY_WITHHELD_TEXT}\n\n{HINT['text']}", hint=HINT))
    assert withheld.refused and withheld.hint_shown and not withheld.leaked and withheld.correct


def test_a_cited_answer_is_not_a_refusal_and_a_leak_is_wrong():
    assert not judge(NONE, Outcome("Париж [1].", cards=(card("Париж"),))).correct
    leak = judge(WITHHELD, Outcome(f"{NOT_FOUND_TEXT} План — 1,8 млрд ₽.", hint=HINT))
    assert leak.leaked and not leak.correct


def test_figures_over_a_set():
    verdicts = [
        judge(VACATION, Outcome("28 календарных дней [1][2].", cards=(card("28 календарных дней"), card("обед")))),
        judge(VACATION, Outcome(NOT_FOUND_TEXT)),
        judge(NONE, Outcome(NOT_FOUND_TEXT, first_sentence_ms=10)),
        judge(WITHHELD, Outcome(ONLY_WITHHELD_TEXT, hint=HINT, first_sentence_ms=30)),
    ]
    score = figures(verdicts)
    assert score.correctness == 0.5
    assert score.citation_precision == 0.5
    assert score.refusal_recall == 1.0 and score.refusal_precision == round(2 / 3, 3)
    assert score.withheld_hint == 1.0 and score.first_sentence_p50_ms == 20
    assert score.failed == ("v",)


def test_the_shipped_set_is_big_enough_and_mixed():
    questions = questions_load()
    assert len(questions) >= 60
    assert {q.kind for q in questions} == {"answer", "none", "withheld"}
    assert {q.lang for q in questions} == {"ru", "en"}
    assert {q.area for q in questions} == {"corpus", "jira", "confluence"}
