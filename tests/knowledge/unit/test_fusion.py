"""Reciprocal Rank Fusion with a stable tie-break, and the withheld rule (KS-3/4)."""

import pytest

from knowledge.fusion import RRF_K, exact_first, rrf, withheld_chunk_ids


def test_rrf_scores_are_the_sum_of_reciprocal_ranks():
    fused = dict(rrf([[1, 2, 3], [3, 1]]))
    assert fused[1] == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert fused[3] == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1))
    assert fused[2] == pytest.approx(1 / (RRF_K + 2))


def test_rrf_orders_best_first():
    assert [c for c, _ in rrf([[1, 2, 3], [3, 1]])] == [1, 3, 2]


def test_ties_are_broken_by_best_rank_then_id():
    # 7 and 5 both appear once at rank 1: equal scores and equal best rank → lower id first
    assert [c for c, _ in rrf([[7], [5]])] == [5, 7]
    # 9 at rank 1 in one list beats 4 at rank 2 in another... only by score; equal score → best rank
    assert [c for c, _ in rrf([[9, 4], [4, 9]])] == [4, 9]


def test_fusion_is_deterministic_under_input_permutation_of_lists():
    a, b = [5, 3, 8, 1], [8, 2, 5]
    assert rrf([a, b]) == rrf([b, a])


def test_a_list_counts_each_chunk_once():
    assert dict(rrf([[1, 1, 2]]))[1] == pytest.approx(1 / (RRF_K + 1))


def test_empty_lists_fuse_to_nothing():
    assert rrf([[], []]) == []


def test_withheld_only_when_a_hidden_chunk_would_make_the_top_k():
    # unfiltered lexical list: 10 (hidden) first; vector list: 1, 2, 3 visible, 11 (hidden) last
    unfiltered = [[10, 1, 2], [1, 2, 3, 11]]
    # fused: 1, 2, 10, 3, 11
    assert withheld_chunk_ids(unfiltered=unfiltered, hidden={10, 11}, k=3) == [10]
    assert withheld_chunk_ids(unfiltered=unfiltered, hidden={10, 11}, k=2) == []
    assert withheld_chunk_ids(unfiltered=unfiltered, hidden={11}, k=4) == []
    assert withheld_chunk_ids(unfiltered=unfiltered, hidden={10, 11}, k=5) == [10, 11]


def test_exact_matches_come_first_in_their_own_order_with_their_fused_scores():
    lists = [[1, 2, 3], [3, 1]]
    fused = exact_first([9, 2], lists)
    assert [c for c, _ in fused] == [9, 2, 1, 3]
    scores = dict(fused)
    assert scores[9] == pytest.approx(1 / (RRF_K + 1))
    assert scores[2] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 2))


def test_without_exact_matches_the_order_is_plain_rrf():
    assert exact_first([], [[1, 2, 3], [3, 1]]) == rrf([[1, 2, 3], [3, 1]])
