"""The ef of a graph walk the ACL filters (``vector.walk_ef``): wider as the store grows and as the
ACL's share shrinks, never below the ef it is given, at most EF_MAX."""

from __future__ import annotations

import pytest

from knowledge.search import vector


@pytest.fixture(autouse=True)
def _rules(monkeypatch):
    # the rules' arithmetic, with constants fixed here (the module's are tuned by the benchmark)
    monkeypatch.setattr(vector, "EF_BASE_ROWS", 100_000)
    monkeypatch.setattr(vector, "EF_GROWTH", 0.5)
    monkeypatch.setattr(vector, "EF_VISIBLE_RANKS", 2.0)
    monkeypatch.setattr(vector, "EF_MAX", 1000)


def test_a_store_up_to_the_base_size_read_broadly_keeps_the_ef():
    assert vector.walk_ef(250, 100_000, 100_000, 20) == 250
    assert vector.walk_ef(250, 20_000, 12_000, 20) == 250


def test_the_graph_rule_grows_with_the_square_root_of_the_store():
    assert vector.walk_ef(250, 400_000, 400_000, 20) == 500
    assert vector.walk_ef(250, 1_000_000, 1_000_000, 20) == 791  # 250 × √10, rounded up


def test_the_acl_rule_reaches_past_the_depth_th_visible_row():
    # 10 % visible: the 20th visible chunk sits near rank 200; the list goes to twice that
    assert vector.walk_ef(250, 100_000, 10_000, 20) == 400
    # both rules: the larger wins
    assert vector.walk_ef(250, 400_000, 40_000, 20) == 500
    assert vector.walk_ef(250, 400_000, 20_000, 20) == 800


def test_never_below_the_given_ef_and_at_most_ef_max():
    assert vector.walk_ef(600, 100_000, 100_000, 20) == 600
    assert vector.walk_ef(250, 10_000_000, 100_000, 20) == 1000
    vector.EF_MAX = 0
    assert vector.walk_ef(250, 1_000_000, 10_000, 20) == 250


def test_statistics_not_gathered_yet_keep_the_ef():
    # reltuples is -1 before the first ANALYZE; a plan may expect 0 rows
    assert vector.walk_ef(250, -1.0, 5_000, 20) == 250
    assert vector.walk_ef(250, 100_000, 0.0, 20) == 250
