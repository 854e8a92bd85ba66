"""facade.upsert_record / delete_record: how other apps (the hub's Jira mirror) feed the store."""

import pytest

from achilles.errors import NotFound, ValidationFailed
from knowledge import facade
from knowledge.models import Record
from tests.knowledge.conftest import identity_of

pytestmark = pytest.mark.django_db

EMPLOYEE = identity_of("everyone", "user:1")


def test_jira_issues_become_searchable_linked_records():
    a = facade.upsert_record(
        source_system="jira",
        external_id="CRM-1",
        title="CRM-1 Падает экспорт в PDF",
        text="Экспорт отчётов больше 200 страниц падает.",
        acl=["everyone"],
        links=[("CRM-2", "blocks")],
    )
    b = facade.upsert_record(
        source_system="jira",
        external_id="CRM-2",
        title="CRM-2 Релиз 4.2.1",
        text="Исправления для релиза 4.2.1.",
        acl=["everyone"],
    )
    # the link target arrived later: the link appeared when it was stored
    assert [c.record_id for c in facade.search("экспорт PDF", EMPLOYEE).candidates][0] == a
    assert [(n.record_id, n.link_type) for n in facade.graph(a, EMPLOYEE).nodes] == [(b, "blocks")]
    facade.delete_record(source_system="jira", external_id="CRM-1")
    assert not Record.objects.filter(pk=a).exists()
    with pytest.raises(NotFound):
        facade.delete_record(source_system="jira", external_id="CRM-1")


def test_bad_records_are_validation_errors():
    with pytest.raises(ValidationFailed):
        facade.upsert_record(source_system="jira", external_id="CRM-3", title="x", text=" ", acl=["everyone"])
    with pytest.raises(ValidationFailed):
        facade.upsert_record(source_system="jira", external_id="CRM-3", title="x", text="y", acl=[])


def _jira(key: str, acl: list[str]) -> int:
    return facade.upsert_record(
        source_system="jira", external_id=key, title=f"{key} Смета", text="Смета квартала.", acl=acl
    )


def test_records_acl_set_re_acls_the_records_and_their_chunks_at_once():
    from django.db import connection

    # given
    a, b = _jira("FIN-1", ["everyone"]), _jira("FIN-2", ["everyone"])
    other = facade.upsert_record(source_system="files", external_id="FIN-1", title="x", text="y", acl=["everyone"])
    before = facade.generation()

    # when
    changed = facade.records_acl_set(source_system="jira", external_ids=["FIN-1", "FIN-2", "FIN-9"], acl=["group:fin"])

    # then: both records, their chunks (the trigger) and the generation; another system's record stays
    assert changed == 2
    assert facade.generation() > before
    assert facade.visible_records([a, b, other], EMPLOYEE) == frozenset({other})
    assert facade.visible_records([a, b], identity_of("group:fin")) == frozenset({a, b})
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT acl FROM knowledge_chunks WHERE record_id = ANY(%s)", [[a, b]])
        assert cursor.fetchall() == [(["group:fin"],)]


def test_records_acl_set_writes_nothing_when_every_record_already_has_the_acl():
    _jira("FIN-1", ["group:fin"])
    before = facade.generation()
    assert facade.records_acl_set(source_system="jira", external_ids=["FIN-1"], acl=["group:fin"]) == 0
    assert facade.records_acl_set(source_system="jira", external_ids=[], acl=["group:fin"]) == 0
    assert facade.generation() == before


def test_records_acl_set_refuses_a_bad_acl():
    _jira("FIN-1", ["everyone"])
    with pytest.raises(ValidationFailed):
        facade.records_acl_set(source_system="jira", external_ids=["FIN-1"], acl=[])
    with pytest.raises(ValidationFailed):
        facade.records_acl_set(source_system="jira", external_ids=["FIN-1"], acl=["finance"])


def test_an_upsert_after_a_re_acl_is_not_unchanged_under_another_acl():
    # given: a record re-ACLed in bulk (its content hash still names the old ACL)
    a = _jira("FIN-1", ["everyone"])
    facade.records_acl_set(source_system="jira", external_ids=["FIN-1"], acl=["group:fin"])

    # when: the same content arrives under the old ACL again
    _jira("FIN-1", ["everyone"])

    # then: it is written, not skipped as unchanged
    assert facade.visible_records([a], EMPLOYEE) == frozenset({a})
