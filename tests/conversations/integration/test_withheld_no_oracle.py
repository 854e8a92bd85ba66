"""Chat's ``withheld_hint`` is no content oracle either (issue 10, finding 1): on the real Knowledge
Store with the offline builtin model, a number hidden in a closed document and its neighbours, and
a word present there and one absent, give the same hint; the topic still gives it."""

import pytest

from conversations import pipeline
from knowledge.services import record_upsert
from tests.conversations.conftest import run_turn

pytestmark = [pytest.mark.integration, pytest.mark.p0]


@pytest.fixture
def salaries(db, model_factory, user_factory, settings):
    settings.WITHHELD_HINTS_PER_HOUR = 10_000
    pipeline.set_engine_deps(None)  # the real facade, the real cache
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    hr = user_factory(username="hr-lead", groups=["hr"])
    for i, text in enumerate(
        [
            "Зарплата выплачивается два раза в месяц.",
            "Зарплата и премия — по итогам квартала.",
            "С зарплаты удерживается налог на доходы.",
        ]
    ):
        record_upsert(
            source_system="files",
            external_id=f"pub/{i}.md",
            title=f"Выплаты {i}",
            text=text,
            acl=["everyone"],
            user_writable=False,
        )
    record_upsert(
        source_system="hr",
        external_id="hr/salary.md",
        title="Оклады",
        text="Зарплата Иванова — 424242 рубля в месяц. Проект PLUTONIUM.",
        acl=["group:hr"],
        author_principal_id=f"user:{hr.pk}",
        user_writable=False,
    )
    return user_factory(username="outsider", groups=["it"])


def _hint(user, question):
    outcome = run_turn(user, question)
    assert outcome.error is None
    return outcome.done.withheld_hint


def test_the_chat_hint_does_not_tell_a_hidden_value_from_its_neighbours(salaries):
    """Failed before the fix: «PLUTONIUM» / «424242» came back with a hint, «URANIUM» / «424243» without."""
    hints = {
        q: _hint(salaries, f"Что известно про {q}?") for q in ("PLUTONIUM", "URANIUM", "424242", "424243", "424241")
    }
    assert len({repr(h) for h in hints.values()}) == 1, hints
    topical = {q: _hint(salaries, f"Какая зарплата {q}?") for q in ("424242", "424243", "424299")}
    assert len({repr(h) for h in topical.values()}) == 1
    assert topical["424242"] is not None and topical["424242"]["sources"][0]["source_system"] == "hr"
    assert "424242" not in str(topical["424243"]) and "Оклады" not in str(list(topical.values()))
