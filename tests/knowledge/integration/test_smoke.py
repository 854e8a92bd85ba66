import pytest

from knowledge import facade
from tests.knowledge.conftest import identity_of

pytestmark = pytest.mark.django_db


def test_smoke(make_record, hash_embedder):
    assert facade.is_empty()
    a = make_record("a.md", "# Отпуск\n\nСотрудникам положено 28 дней отпуска в год.", acl=["everyone"])
    b = make_record("b.md", "# Бюджет\n\nБюджет отпуска отдела финансов 5 млн рублей.", acl=["group:finance"], author="user:7")
    assert not facade.is_empty()
    r = facade.search("сколько дней отпуска", identity_of("everyone", "public", "user:1"), k=5)
    print(r)
    assert [c.record_id for c in r.candidates][0] == a
    assert r.withheld == (facade.Withheld("files", "user:7"),)
    s = facade.sql("SELECT id, title FROM ks_records ORDER BY id", identity_of("everyone"))
    print(s)
    assert [row[0] for row in s.rows] == [a]
