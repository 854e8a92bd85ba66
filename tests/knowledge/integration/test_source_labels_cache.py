"""The admins' source labels, cached for every grounded turn (``knowledge.source_labels``)."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_admins_labels_are_read_once_and_a_change_is_seen_at_once(django_assert_num_queries):
    """Every grounded turn reads them: from the cache, no statement; a saved or deleted policy drops
    the cached copy."""
    from knowledge.models import SourcePolicy
    from knowledge.source_labels import source_label_overrides

    policy = SourcePolicy.objects.create(source_system="confluence:7", display_label="Вики")
    assert source_label_overrides() == {"confluence:7": "Вики"}
    with django_assert_num_queries(0):
        assert source_label_overrides() == {"confluence:7": "Вики"}
    policy.display_label = "Вики отдела продаж"
    policy.save()
    assert source_label_overrides() == {"confluence:7": "Вики отдела продаж"}
    policy.delete()
    assert source_label_overrides() == {}
