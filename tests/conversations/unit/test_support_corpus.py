"""The support check measured on the hand-written adversarial corpus
(``tests/conversations/data/support_corpus.yaml``): pure, no database.

Targets (issue 31): at least 99 % of unsupported sentences blocked, at least 90 % of supported
paraphrases passed. The figures are printed (``-s``) and enforced."""

from pathlib import Path

import pytest
import yaml

from conversations.support import check_sentence

pytestmark = [pytest.mark.unit, pytest.mark.p0]

CORPUS = Path(__file__).resolve().parent.parent / "data" / "support_corpus.yaml"


def load_corpus() -> list[tuple[dict[int, str], str, str | None]]:
    """(sources, sentence, kind) with kind None for a supported sentence."""
    rows = []
    for group in yaml.safe_load(CORPUS.read_text(encoding="utf-8")):
        sources = {int(k): v for k, v in group["cited"].items()}
        rows += [(sources, s, None) for s in group["supported"]]
        rows += [(sources, s, kind) for kind, s in group["unsupported"]]
    return rows


def measure(rows, *, meaning=None) -> dict:
    passed_good = [s for src, s, kind in rows if kind is None and check_sentence(s, src, meaning=meaning).supported]
    leaked = [
        (kind, s) for src, s, kind in rows if kind is not None and check_sentence(s, src, meaning=meaning).supported
    ]
    good = sum(1 for *_, kind in rows if kind is None)
    bad = len(rows) - good
    blocked = bad - len(leaked)
    return {
        "pairs": len(rows),
        "supported": good,
        "unsupported": bad,
        "supported_passed": len(passed_good) / good,
        "unsupported_blocked": blocked / bad,
        # Precision of "blocked": of the blocked sentences, how many were unsupported.
        "block_precision": blocked / (blocked + good - len(passed_good)),
        "leaked": leaked,
        "passed": passed_good,
    }


def test_corpus_is_large_and_mixed():
    rows = load_corpus()
    assert len(rows) >= 200
    langs = {"ru" if any("а" <= c <= "я" for c in s.lower()) else "en" for _, s, _ in rows}
    assert langs == {"ru", "en"}
    kinds = {kind for *_, kind in rows if kind}
    assert {"negation", "clause", "roles", "borrowed", "entity", "date", "hedge"} <= kinds


def test_the_four_sentences_of_the_issue_are_blocked():
    sources = {
        1: "Ежегодный отпуск составляет 28 календарных дней. Офис открыт с 9 до 18.",
        2: "Годовая премия составляет 10 процентов оклада и выплачивается в марте.",
    }
    for sentence in [
        "Ежегодный отпуск не составляет 28 календарных дней [1].",
        "Ежегодный отпуск составляет 28 календарных дней, а годовая премия не выплачивается [1].",
        "Офис открыт с 18 до 9 [1].",
        "Премия составляет 28 процентов [1][2].",
    ]:
        assert not check_sentence(sentence, sources).supported, sentence


def test_precision_and_recall_meet_the_targets():
    figures = measure(load_corpus())
    print(
        "\nsupport corpus: {pairs} pairs ({supported} supported, {unsupported} unsupported); "
        "unsupported blocked {unsupported_blocked:.3f}, supported passed {supported_passed:.3f}, "
        "block precision {block_precision:.3f}".format(**figures)
    )
    assert figures["unsupported_blocked"] >= 0.99, figures["leaked"]
    assert figures["supported_passed"] >= 0.90
