"""Withheld without an oracle (issue 10, finding 1): the hint follows the question's topic, never
one rare word or number of it; opt-outs; a per-user rate; every hint in the audit trail."""

from __future__ import annotations

import pytest

from achilles.models import AuditEvent
from knowledge import facade
from knowledge.facade import Identity, Withheld
from knowledge.models import SourcePolicy

pytestmark = pytest.mark.django_db

SECRET = 424242


@pytest.fixture
def hr_corpus(make_record, user_factory):
    """Three open documents about salaries, one closed one with a colleague's salary."""
    hr = user_factory(username="hr-lead", groups=["hr"])
    outsider = user_factory(username="outsider", groups=["it"])
    make_record("pub/pay-day.md", "# Зарплата\n\nЗарплата выплачивается два раза в месяц.", acl=["everyone"])
    make_record("pub/bonus.md", "# Премии\n\nЗарплата и премия считаются по итогам квартала.", acl=["everyone"])
    make_record("pub/tax.md", "# Налоги\n\nС зарплаты удерживается налог на доходы.", acl=["everyone"])
    make_record(
        "hr/salary.md",
        f"# Оклады\n\nЗарплата Иванова — {SECRET} рубля в месяц. Проект PLUTONIUM.",
        acl=["group:hr"],
        source_system="hr",
        author=f"user:{hr.pk}",
    )
    return {"hr": hr, "outsider": outsider}


def _withheld(query: str, user) -> tuple[Withheld, ...]:
    return facade.search(query, Identity.for_user(user), 8).withheld


@pytest.mark.p0
def test_a_hidden_number_and_its_100_neighbours_get_the_same_answer(hr_corpus, settings):
    """Failed before the fix: «424242» alone gave withheld [{hr}], every neighbour [] (the probe's
    sweep 424190…424299 lit up only the salary); with a topical word, likewise only the exact value."""
    settings.WITHHELD_HINTS_PER_HOUR = 10_000  # the sweep is about discrimination, not the rate
    outsider = hr_corpus["outsider"]
    neighbours = range(SECRET - 50, SECRET + 51)  # the value and its 100 neighbours

    alone = {n: _withheld(str(n), outsider) for n in neighbours}
    assert set(alone.values()) == {()}

    topical = {n: _withheld(f"зарплата {n}", outsider) for n in neighbours}
    assert len(set(topical.values())) == 1
    # not vacuous: the topic itself (salaries, in four records) does point at the closed source
    assert topical[SECRET] == (Withheld("hr", f"user:{hr_corpus['hr'].pk}"),)
    assert _withheld("зарплата", outsider) == topical[SECRET]


@pytest.mark.p0
def test_a_word_present_and_a_word_absent_get_the_same_answer(hr_corpus):
    """Failed before the fix: «PLUTONIUM» → withheld [{hr}], «URANIUM» → [] (a content oracle)."""
    outsider = hr_corpus["outsider"]
    for present, absent in [
        ("PLUTONIUM", "URANIUM"),
        ("Иванова", "Петрова"),
        ("проект PLUTONIUM", "проект URANIUM"),
        ("зарплата Иванова", "зарплата Петрова"),
        ("оклад PLUTONIUM 424242", "оклад URANIUM 424243"),
    ]:
        assert _withheld(present, outsider) == _withheld(absent, outsider), present


@pytest.mark.parametrize(
    "options", [{"dim": 384, "min_similarity": 0.05}, {"dim": 384}], ids=["configured-floor", "measured-default-floor"]
)
def test_the_semantic_side_does_not_discriminate_either(hr_corpus, model_factory, settings, options):
    """With an embedding model that has a floor, similarity counts, but only of the topical words."""
    settings.WITHHELD_HINTS_PER_HOUR = 10_000
    model_factory(name="hash-floor", provider="hash", kind="embedding", is_default=True, options=options)
    # re-embed the corpus with the model (the fixture ran without one)
    from knowledge.models import Record
    from knowledge.services import record_upsert

    for record in Record.objects.all():
        record_upsert(
            source_system=record.source_system,
            external_id=record.external_id,
            title=record.title,
            text="\n\n".join(record.chunks.order_by("ordinal").values_list("text", flat=True)),
            acl=record.acl,
            author_principal_id=record.author_principal_id,
        )
    outsider = hr_corpus["outsider"]
    answers = {_withheld(f"{n}", outsider) for n in range(SECRET - 50, SECRET + 51)}
    assert answers == {()}
    assert _withheld("PLUTONIUM", outsider) == _withheld("URANIUM", outsider) == ()
    assert len({_withheld(f"зарплата {n}", outsider) for n in range(SECRET - 50, SECRET + 51)}) == 1


def test_the_seed_case_still_hints_the_topic(hr_corpus):
    """A topical question about material closed to the asker keeps its hint (QE «подсказка о скрытом»)."""
    assert _withheld("Какая зарплата и оклад у сотрудников?", hr_corpus["outsider"]) == (
        Withheld("hr", f"user:{hr_corpus['hr'].pk}"),
    )


def test_a_question_worded_with_the_adjective_of_a_topic_hints_it(hr_corpus, make_record):
    """«Какая зарплатная вилка у грейда G4?» gave no hint: «зарплатная» (lexeme «зарплатн») is in
    the closed record only, while «зарплата» is in four. An adjective of a common noun counts with
    its noun's family; a rare word stays rare, and the hint still names only the source and author."""
    outsider = hr_corpus["outsider"]
    make_record(
        "hr/grades.md",
        "# Грейды и зарплатные вилки\n\nG4 (старший специалист) — 210 000–290 000 ₽.",
        acl=["group:hr"],
        source_system="hr",
        author=f"user:{hr_corpus['hr'].pk}",
    )
    hinted = (Withheld("hr", f"user:{hr_corpus['hr'].pk}"),)
    assert _withheld("Какая зарплатная вилка у грейда G4?", outsider) == hinted
    assert _withheld("зарплатная вилка G5", outsider) == _withheld("зарплатная вилка G4", outsider) == hinted
    # a word whose root is in no open record does not become a topic by its suffix
    assert _withheld("плутониевый", outsider) == _withheld("урановый", outsider) == ()


def test_a_record_that_opts_out_is_never_hinted(hr_corpus):
    from knowledge.models import Record
    from knowledge.services import record_never_hint_set

    outsider = hr_corpus["outsider"]
    assert _withheld("зарплата", outsider) != ()
    record_never_hint_set(record_id=Record.objects.get(external_id="hr/salary.md").pk, never_hint=True)
    assert _withheld("зарплата", outsider) == ()


def test_a_sensitive_source_is_never_hinted(hr_corpus, make_record):
    outsider = hr_corpus["outsider"]
    make_record(
        "fin/payroll.md", "Зарплата: фонд оплаты труда на квартал.", acl=["group:finance"], source_system="finance"
    )
    assert {w.source_system for w in _withheld("зарплата", outsider)} == {"hr", "finance"}
    SourcePolicy.objects.create(source_system="hr", never_hint=True)
    assert {w.source_system for w in _withheld("зарплата", outsider)} == {"finance"}


def test_never_hint_comes_from_the_upsert_and_front_matter(make_record, tmp_path):
    from knowledge.ingest import ingest_path
    from knowledge.models import Record

    (tmp_path / "secret.md").write_text("---\nacl: group:hr\nnever_hint: true\n---\nЗарплата.\n", encoding="utf-8")
    (tmp_path / "bad.md").write_text("---\nnever_hint: maybe\n---\nТекст.\n", encoding="utf-8")
    report = ingest_path(tmp_path)
    assert Record.objects.get(external_id="secret.md").never_hint is True
    assert [name for name, _ in report.errors] == ["bad.md"]


def test_every_hint_is_in_the_audit_trail(hr_corpus):
    outsider = hr_corpus["outsider"]
    _withheld("зарплата сотрудников", outsider)
    _withheld("отпуск", outsider)  # nothing withheld: nothing recorded
    event = AuditEvent.objects.get(action="withheld_hint")
    assert (event.actor_id, event.actor, event.target) == (outsider.pk, "outsider", "knowledge.search")
    assert event.details == {
        "query": "зарплата сотрудников",
        "withheld": [{"source_system": "hr", "author_principal_id": f"user:{hr_corpus['hr'].pk}"}],
    }


def test_hinted_searches_are_rated_per_user(hr_corpus, settings, user_factory):
    settings.WITHHELD_HINTS_PER_HOUR = 3
    outsider, other = hr_corpus["outsider"], user_factory(username="other", groups=["it"])
    answers = [_withheld("зарплата", outsider) for _ in range(5)]
    assert [bool(a) for a in answers] == [True, True, True, False, False]
    assert _withheld("зарплата", other) != ()  # the rate is per user
    assert AuditEvent.objects.filter(action="withheld_hint", actor_id=outsider.pk).count() == 3
    assert AuditEvent.objects.filter(action="withheld_hint_suppressed", actor_id=outsider.pk).count() == 2
