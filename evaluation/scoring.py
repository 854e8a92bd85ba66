"""Scoring one answer against its question, and the figures over a question set. Pure: no
database, no model; the runner (``evaluation.runner``) supplies what the client received.

A question is one of three kinds:

- ``answer``: the base holds the answer for ``demo``. Correct when every expected fact is in the
  answer (a fact may list alternatives: ``"28 дней|28 календарных дней"``), and the answer is not
  a refusal.
- ``none``: nothing in the base answers it. Correct when the answer is a refusal.
- ``withheld``: only records ``demo`` may not read hold the answer. Correct when the answer is a
  refusal, no expected fact leaks, and the withheld hint is shown.

Citation precision counts, over the answers that cite anything, the cited cards whose passage
holds one of the expected facts (or, for a question without facts, whose title or url names the
expected source).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from achilles.llm import NOT_FOUND_TEXT

ONLY_WITHHELD_TEXT = (
    "Среди доступных вам материалов ответа нет, но релевантные документы есть — они закрыты правами доступа."
)
REFUSAL_PHRASES = ("не нашёл", "не нашел", "не нашла", "ответа нет", "not found", "couldn't find", "could not find")
KINDS = ("answer", "none", "withheld")


@dataclass(frozen=True)
class Question:
    """One question of the set: what is asked, in which language, and what a right answer holds."""

    id: str
    question: str
    kind: str
    lang: str = "ru"
    facts: tuple[str, ...] = ()
    source: str = ""
    area: str = "corpus"

    @classmethod
    def from_dict(cls, data: dict) -> Question:
        kind = data.get("kind", "answer")
        if kind not in KINDS:
            raise ValueError(f"{data.get('id')}: kind must be one of {KINDS}, not {kind!r}")
        facts = tuple(str(f) for f in data.get("facts", ()))
        if kind == "answer" and not facts:
            raise ValueError(f"{data['id']}: an answerable question needs expected facts")
        if kind != "none" and not data.get("source"):
            raise ValueError(f"{data['id']}: name the expected source")
        return cls(
            id=str(data["id"]),
            question=str(data["question"]),
            kind=kind,
            lang=str(data.get("lang", "ru")),
            facts=facts,
            source=str(data.get("source", "")),
            area=str(data.get("area", "corpus")),
        )


@dataclass(frozen=True)
class Card:
    """A source card the client received: its title, url and the passage it shows."""

    title: str
    url: str
    passage: str
    markers: tuple[int, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """What the client received for one question."""

    text: str
    cards: tuple[Card, ...] = ()
    hint: dict | None = None
    first_sentence_ms: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Verdict:
    question: Question
    outcome: Outcome
    refused: bool
    facts_found: bool
    leaked: bool
    precise_cards: int
    cards: int
    hint_shown: bool

    @property
    def correct(self) -> bool:
        if self.outcome.error:
            return False
        if self.question.kind == "answer":
            return self.facts_found and not self.refused
        if self.question.kind == "withheld":
            return self.refused and not self.leaked and self.hint_shown
        return self.refused


def normalize(text: str) -> str:
    """Case, ё, non-breaking and thin spaces, thousands separators («1 500» = «1500»), dashes."""
    text = text.casefold().replace("ё", "е").replace("\u00a0", " ").replace("\u202f", " ").replace("\u2009", " ")
    text = re.sub(r"(?<=\d) (?=\d{3}\b)", "", text)
    text = text.replace("—", "-").replace("–", "-")
    return re.sub(r"\s+", " ", text)


def fact_in(fact: str, text: str) -> bool:
    haystack = normalize(text)
    return any(normalize(alternative).strip() in haystack for alternative in fact.split("|") if alternative.strip())


def answer_body(text: str, hint: dict | None) -> str:
    """The answer without the withheld hint's tail (the page shows the hint as a notice of its own)."""
    tail = (hint or {}).get("text", "")
    body = text.strip()
    if tail and body.endswith(tail):
        body = body[: -len(tail)].strip()
    return body


def is_refusal(text: str, hint: dict | None = None, *, cited: bool = False) -> bool:
    """The product's refusal: its own «не нашёл» texts exactly, or an uncited answer saying so."""
    body = answer_body(text, hint)
    if body in (NOT_FOUND_TEXT, ONLY_WITHHELD_TEXT):
        return True
    return not cited and any(phrase in normalize(body) for phrase in REFUSAL_PHRASES)


def names_source(card: Card, source: str) -> bool:
    wanted = [s.strip().casefold() for s in source.split("|") if s.strip()]
    return any(w in card.title.casefold() or w in card.url.casefold() for w in wanted)


def card_holds(question: Question, card: Card) -> bool:
    """A precise card: its passage holds an expected fact (or, without facts, it names the source)."""
    if question.facts:
        return any(fact_in(f, card.passage) for f in question.facts)
    return names_source(card, question.source)


def judge(question: Question, outcome: Outcome) -> Verdict:
    body = answer_body(outcome.text, outcome.hint)
    refused = is_refusal(outcome.text, outcome.hint, cited=bool(outcome.cards))
    facts_found = bool(question.facts) and all(fact_in(f, body) for f in question.facts)
    leaked = question.kind == "withheld" and any(fact_in(f, body) for f in question.facts)
    precise = sum(card_holds(question, card) for card in outcome.cards)
    return Verdict(
        question=question,
        outcome=outcome,
        refused=refused,
        facts_found=facts_found,
        leaked=leaked,
        precise_cards=precise,
        cards=len(outcome.cards),
        hint_shown=bool(outcome.hint),
    )


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 3) if denominator else None


@dataclass(frozen=True)
class Figures:
    """The figures of one model over the question set."""

    questions: int
    correctness: float | None
    citation_precision: float | None
    refusal_precision: float | None
    refusal_recall: float | None
    withheld_hint: float | None
    first_sentence_p50_ms: float | None
    errors: int
    failed: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        return {
            "questions": self.questions,
            "correctness": self.correctness,
            "citation_precision": self.citation_precision,
            "refusal_precision": self.refusal_precision,
            "refusal_recall": self.refusal_recall,
            "withheld_hint": self.withheld_hint,
            "first_sentence_p50_ms": self.first_sentence_p50_ms,
            "errors": self.errors,
        }


def figures(verdicts: Sequence[Verdict]) -> Figures:
    """Correctness over the answerable questions; citation precision over their cited cards;
    refusal precision and recall (a refusal is right exactly when the base has no answer for
    ``demo``: kinds ``none`` and ``withheld``); the withheld hint shown, without a leak, on the
    ``withheld`` questions; the median time to the first released sentence."""
    answerable = [v for v in verdicts if v.question.kind == "answer"]
    should_refuse = [v for v in verdicts if v.question.kind != "answer"]
    refused = [v for v in verdicts if v.refused]
    withheld = [v for v in verdicts if v.question.kind == "withheld"]
    times = [v.outcome.first_sentence_ms for v in verdicts if v.outcome.first_sentence_ms is not None]
    return Figures(
        questions=len(verdicts),
        correctness=_ratio(sum(v.correct for v in answerable), len(answerable)),
        citation_precision=_ratio(sum(v.precise_cards for v in answerable), sum(v.cards for v in answerable)),
        refusal_precision=_ratio(sum(v.question.kind != "answer" for v in refused), len(refused)),
        refusal_recall=_ratio(sum(v.refused for v in should_refuse), len(should_refuse)),
        withheld_hint=_ratio(sum(v.hint_shown and not v.leaked for v in withheld), len(withheld)),
        first_sentence_p50_ms=round(statistics.median(times), 1) if times else None,
        errors=sum(bool(v.outcome.error) for v in verdicts),
        failed=tuple(v.question.id for v in verdicts if not v.correct),
    )
