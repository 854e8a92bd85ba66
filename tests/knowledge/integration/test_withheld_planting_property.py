"""Property (security round two, finding 1): over random corpora of curated records and records
people can write, the withheld answer to a one-word question equals a brute-force oracle that counts
curated records only — so no set of planted records changes whether a hidden record is hinted."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge import facade
from knowledge.models import Record
from knowledge.services import record_upsert

pytestmark = [pytest.mark.django_db, pytest.mark.p0]

WORDS = ["отпуск", "бюджет", "сервер", "пароль", "премия", "договор"]
MIN_RECORDS = 3

# (curated?, visible to the asker?, words); at most 8 records, so the unfiltered top-8 holds them all
documents = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.sets(st.sampled_from(WORDS), min_size=1, max_size=4)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=documents, word=st.sampled_from(WORDS))
def test_only_curated_records_make_a_word_a_topic(docs, word, settings):
    settings.WITHHELD_HINTS_PER_HOUR = 100_000
    settings.WITHHELD_MIN_RECORDS = MIN_RECORDS
    Record.objects.all().delete()
    for i, (curated, visible, words) in enumerate(docs):
        record_upsert(
            source_system="files" if curated else "jira",
            external_id=f"doc-{i}",
            title=f"Документ {i}",
            text=" ".join(sorted(words)),
            acl=["everyone"] if visible else ["group:finance"],
            origin="prop",
            user_writable=not curated,
        )
    # the oracle: a topic iff enough curated records hold the word; then every hidden holder is hinted
    # (by source: the coordinates are the source system and the author, none here)
    topical = sum(1 for curated, _, words in docs if curated and word in words) >= MIN_RECORDS
    expected = (
        {("files" if c else "jira", None) for i, (c, v, words) in enumerate(docs) if not v and word in words}
        if topical
        else set()
    )
    identity = facade.Identity(principals=frozenset({"everyone", "group:it"}), user_id=None)
    got = {(w.source_system, w.author_principal_id) for w in facade.search(word, identity, 8).withheld}
    assert got == expected
