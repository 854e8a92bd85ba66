"""Links are created and deleted through the service layer, the admin's inline included (issue 11,
item 7: the admin deleted link rows itself under a comment saying it used the service)."""

import pytest

from knowledge import facade, services
from knowledge.models import RecordLink

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_a_link_is_deleted_through_its_service():
    a = facade.upsert_record(source_system="files", external_id="a", title="A", text="Текст A.", acl=["everyone"])
    b = facade.upsert_record(source_system="files", external_id="b", title="B", text="Текст B.", acl=["everyone"])
    link = services.record_link_create(from_record_id=a, to_record_id=b)
    services.record_link_delete(link_id=link.pk)
    services.record_link_delete(link_id=link.pk)  # already gone: nothing to do
    assert not RecordLink.objects.filter(pk=link.pk).exists()


def test_the_admin_inline_deletes_through_the_service(monkeypatch, rf):
    from django.contrib.admin.sites import site

    from knowledge.models import Record

    deleted = []
    monkeypatch.setattr(services, "record_link_delete", lambda *, link_id: deleted.append(link_id))
    formset = type(
        "Formset", (), {"save": lambda self, commit=True: [], "deleted_objects": [RecordLink(pk=41), RecordLink(pk=42)]}
    )()
    site._registry[Record].save_formset(rf.post("/"), None, formset, True)
    assert deleted == [41, 42]
