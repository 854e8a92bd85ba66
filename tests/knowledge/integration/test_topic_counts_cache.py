"""A word's record count (does it make the question's topic?) is cached per content generation:
the cache never answers for content it did not count — after a new record, nor after a rolled-back
change whose generation number is reused by another change."""

from __future__ import annotations

import pytest
from django.db import transaction

from knowledge import facade
from knowledge.facade import Withheld
from tests.knowledge.conftest import identity_of

pytestmark = pytest.mark.django_db

OUTSIDER = identity_of("everyone")
HINT = (Withheld(source_system="fin", author_principal_id="user:7"),)


@pytest.fixture
def two_budget_records(make_record, settings):
    """«бюджет» in two records (one closed): below the topical threshold of three records."""
    settings.WITHHELD_MIN_RECORDS = 3
    settings.WITHHELD_HINTS_PER_HOUR = 10_000
    make_record("open.md", "Бюджет отдела утверждается в декабре.", acl=["everyone"])
    make_record(
        "closed.md", "Бюджет на премии: пять миллионов.", acl=["group:fin"], source_system="fin", author="user:7"
    )


def test_a_third_record_makes_the_word_topical_at_once(two_budget_records, make_record):
    assert facade.search("бюджет", OUTSIDER).withheld == ()  # counted (and cached): two records
    make_record("third.md", "Бюджет проекта согласован.", acl=["everyone"])
    assert facade.search("бюджет", OUTSIDER).withheld == HINT


def test_a_rolled_back_change_leaves_no_count_behind(two_budget_records, make_record):
    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        make_record("third.md", "Бюджет проекта согласован.", acl=["everyone"])
        assert facade.search("бюджет", OUTSIDER).withheld == HINT  # three records, inside the change
        raise Undo
    # another change takes the same generation number; «бюджет» is in two records again
    make_record("other.md", "Отпуск оформляется заранее.", acl=["everyone"])
    assert facade.search("бюджет", OUTSIDER).withheld == ()
