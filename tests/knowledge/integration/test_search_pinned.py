"""search() returns exactly the pinned result lists for a fixed corpus and a fixed query set.

A guard for changes that should make search faster without changing what it finds (fewer round
trips, another index, another statement shape): the candidates (record, chunk ordinal, rank, score)
and the withheld coordinates of 40 queries × 4 identities over a 240-record corpus were recorded
before such a change (``search_pinned.json``). Any change of a result fails here. When a change of
results is the point, re-record with ``KS_PIN_WRITE=1 pytest tests/knowledge/integration/test_search_pinned.py``
and say why in the commit.

This test runs inside a transaction, where search keeps to one connection; the parallel path (the
nearest-neighbour statement on a second connection) is held to the same pins by
``test_search_parallel.py``.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from knowledge import facade
from tests.knowledge.conftest import identity_of

pytestmark = pytest.mark.django_db

PINNED = Path(__file__).with_name("search_pinned.json")
SEED = 15
IDENTITIES = {
    "broad": identity_of("everyone", "public", "group:g1", "user:3"),
    "narrow": identity_of("group:narrow"),
    "anonymous": identity_of("public"),
    "group": identity_of("group:g2"),
}
_ONSETS = ["б", "в", "г", "д", "з", "к", "л", "м", "н", "п", "р", "с", "т", "ф", "х", "ч", "ш", "пр", "ст", "тр"]
_VOWELS = ["а", "е", "и", "о", "у", "ы"]
_ENDINGS = ["", "ый", "ая", "ов", "ами", "ение", "ость", "ать", "ка", "ник"]
STOP = ["и", "в", "не", "на", "что", "с", "по", "как", "это", "к", "для", "или", "при", "когда"]


def _corpus(rng: random.Random) -> tuple[list[dict], list[str]]:
    words: list[str] = []
    while len(words) < 600:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.choice((2, 2, 3)))) + rng.choice(
            _ENDINGS
        )
        if word not in words:
            words.append(word)
    topics = [rng.sample(words[60:], 12) for _ in range(30)]
    records = []
    for n in range(240):
        topic = rng.randrange(len(topics))
        roll = rng.random()
        acl = (
            ["group:narrow"]
            if roll < 0.05
            else ["public"]
            if roll < 0.2
            else ["everyone"]
            if roll < 0.6
            else [rng.choice(["group:g1", "group:g2", "group:g3"])]
            if roll < 0.9
            else [f"user:{rng.randrange(1, 6)}"]
        )
        paragraphs = []
        for _ in range(rng.choice((1, 2, 3))):
            tokens = (
                rng.choices(STOP, k=8)
                + rng.choices(words[:60], k=5)
                + rng.choices(topics[topic], k=12)
                + [str(rng.randrange(100, 999))]
            )
            rng.shuffle(tokens)
            paragraphs.append(" ".join(tokens).capitalize() + ".")
        records.append(
            {
                "external_id": f"doc-{n}",
                "title": f"Документ {n} {rng.choice(topics[topic])}",
                "text": "\n\n".join(paragraphs),
                "acl": acl,
                "author": f"user:{rng.randrange(1, 9)}",
                "source_system": rng.choice(["wiki", "jira", "files"]),
            }
        )
    queries = []
    for _ in range(40):
        topic = topics[rng.randrange(len(topics))]
        picked = rng.sample(topic, rng.choice((1, 2, 3))) + rng.choices(words[:300], k=rng.choice((0, 1)))
        if rng.random() < 0.15:
            picked.append(str(rng.randrange(100, 999)))
        rng.shuffle(picked)
        queries.append(" ".join(picked))
    return records, queries


def _build(make_record) -> tuple[dict[int, str], list[str]]:
    """The fixed corpus through the real ingestion; {chunk id: "external id#ordinal"} and the queries."""
    records, queries = _corpus(random.Random(SEED))
    for record in records:
        make_record(
            record["external_id"],
            record["text"],
            acl=record["acl"],
            title=record["title"],
            source_system=record["source_system"],
            author=record["author"],
        )
    from knowledge.models import Chunk

    where = {
        chunk_id: f"{external_id}#{ordinal}"
        for chunk_id, external_id, ordinal in Chunk.objects.values_list("id", "record__external_id", "ordinal")
    }
    return where, queries


def _searched(where: dict[int, str], queries: list[str]) -> dict:
    out: dict = {}
    for name, identity in IDENTITIES.items():
        for query in queries:
            result = facade.search(query, identity, 8)
            out[f"{name} | {query}"] = {
                "candidates": [[where[c.chunk_id], c.rank, c.score] for c in result.candidates],
                "withheld": [[w.source_system, w.author_principal_id] for w in result.withheld],
            }
    return out


def _observed(make_record) -> dict:
    return _searched(*_build(make_record))


def assert_pinned(observed: dict) -> None:
    pinned = json.loads(PINNED.read_text())
    assert sum(bool(r["candidates"]) for r in pinned.values()) > 100  # the pins cover real results
    assert sum(bool(r["withheld"]) for r in pinned.values()) > 10
    differing = [key for key in pinned if observed.get(key) != pinned[key]]
    assert not differing, (
        f"{len(differing)} of {len(pinned)} results changed, e.g. {differing[0]!r}: "
        f"{observed.get(differing[0])} != pinned {pinned[differing[0]]}"
    )
    assert observed.keys() == pinned.keys()


def test_search_results_are_the_pinned_ones(make_record, hash_embedder, settings):
    settings.WITHHELD_HINTS_PER_HOUR = 10_000  # the hint policy's hourly cap is not under test here
    observed = _observed(make_record)
    if os.environ.get("KS_PIN_WRITE"):
        PINNED.write_text(json.dumps(observed, ensure_ascii=False, indent=0, sort_keys=True) + "\n")
        pytest.skip("pinned results re-recorded")
    assert_pinned(observed)
