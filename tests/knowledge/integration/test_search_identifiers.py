"""An identifier the question names (a Jira key, an error code, a version, an e-mail address, a
file name) is matched exactly and ranked first by the lexical side, under the reader's ACL."""

import pytest

from knowledge import facade
from tests.knowledge.conftest import identity_of

pytestmark = pytest.mark.django_db

EMPLOYEE = identity_of("everyone")


@pytest.fixture
def issues(make_record, hash_embedder):
    """A project's issues, each a task about payments: they share «задача», «AURORA» and most of
    their words with each other, so only the key tells AURORA-9001 from its neighbours."""
    ids = {}
    for n in range(2, 12):
        key = f"AURORA-90{n:02d}"
        ids[key] = make_record(
            f"jira/{key}",
            f"{key}: Задача по платежам, задача команды платформы. Задача AURORA про платёжный шлюз и задачи банка.",
            title=f"{key} Задача по платежам",
            source_system="jira",
        )
    ids["AURORA-9001"] = make_record(
        "jira/AURORA-9001",
        "AURORA-9001: Платёжный шлюз: повторные списания при таймауте банка.",
        title="AURORA-9001 Повторные списания",
        source_system="jira",
    )
    return ids


def test_a_jira_key_brings_its_own_issue_first(issues):
    # when
    result = facade.search("Что с задачей AURORA-9001?", EMPLOYEE, k=4)

    # then
    assert result.candidates[0].record_id == issues["AURORA-9001"]
    assert "повторные списания" in result.candidates[0].text


def test_a_longer_key_is_not_the_same_identifier(make_record, hash_embedder):
    longer = make_record("jira/AURORA-90011", "AURORA-90011: очередь уведомлений.", title="AURORA-90011")
    own = make_record("jira/AURORA-9001", "AURORA-9001: платёжный шлюз.", title="Платёжный шлюз")

    result = facade.search("AURORA-9001", EMPLOYEE, k=4)

    assert [c.record_id for c in result.candidates][:1] == [own]
    assert longer not in [c.record_id for c in result.candidates][:1]


def test_an_identifier_in_a_closed_record_is_never_surfaced(issues, make_record):
    # given: the only record naming AURORA-9031 is closed to the reader
    closed = make_record(
        "jira/AURORA-9031",
        "AURORA-9031: Задача по зарплатам сотрудников.",
        title="AURORA-9031 Зарплаты",
        acl=["group:finance"],
        source_system="jira",
    )

    # when
    result = facade.search("Что с задачей AURORA-9031?", EMPLOYEE, k=8)
    finance = facade.search("Что с задачей AURORA-9031?", identity_of("everyone", "group:finance"), k=8)

    # then
    assert closed not in [c.record_id for c in result.candidates]
    assert all("AURORA-9031" not in c.text for c in result.candidates)
    assert finance.candidates[0].record_id == closed


@pytest.mark.parametrize(
    ("identifier", "question"),
    [
        ("ivan.petrov@borey.ru", "Кому писать: ivan.petrov@borey.ru?"),
        ("report_2026.xlsx", "Где лежит report_2026.xlsx?"),
        ("4.2", "Что вошло в релиз 4.2?"),
        ("ERR-502", "Что значит ошибка ERR-502?"),
    ],
)
def test_each_kind_of_identifier_is_matched_exactly_and_first(make_record, hash_embedder, identifier, question):
    # given: documents about the question's other words, and one that carries the identifier
    for n in range(8):
        make_record(
            f"doc-{n}",
            f"Релиз, ошибка, отчёт и почта: кому писать, где лежит и что вошло — документ {n}.",
            title=f"Релиз, ошибка, отчёт {n}",
        )
    make_record("near", "Релиз 4.20 и ошибка ERR-5020, почта petrov@borey.ru, файл report_2027.xlsx.", title="Похожий")
    own = make_record("own", f"Справка: {identifier} — вот ответ.", title="Справка")

    result = facade.search(question, EMPLOYEE, k=3)

    assert result.candidates[0].record_id == own
