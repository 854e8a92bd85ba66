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
    # the link target arrived later: the next upsert of CRM-1 resolves it
    assert (
        facade.upsert_record(
            source_system="jira",
            external_id="CRM-1",
            title="CRM-1 Падает экспорт в PDF",
            text="Экспорт отчётов больше 200 страниц падает.",
            acl=["everyone"],
            links=[("CRM-2", "blocks")],
        )
        == a
    )
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
