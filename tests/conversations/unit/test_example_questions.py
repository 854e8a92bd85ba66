"""The empty chat's example questions are answered by open documents of the demo corpus."""

from pathlib import Path

import frontmatter
import pytest

from conversations.pages import EXAMPLE_QUESTIONS

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[3] / "knowledge" / "demo_corpus"


@pytest.mark.parametrize("example", EXAMPLE_QUESTIONS, ids=lambda e: e.source)
def test_an_example_question_is_answered_by_an_open_demo_document(example):
    document = frontmatter.load(CORPUS / example.source)

    assert example.fact in document.content
    assert document["acl"] == ["everyone"]  # every demo account may ask it and get the answer


def test_there_are_three_different_questions():
    assert len({e.text for e in EXAMPLE_QUESTIONS}) == 3
