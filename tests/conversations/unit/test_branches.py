"""The branch a thread of versions shows (conversations.branches): pure, no database."""

from datetime import UTC, datetime, timedelta

import pytest

from conversations.branches import Node, active_branch, path_to

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_a_line_is_its_own_branch_and_has_no_siblings():
    nodes = [Node(1, None, at(0)), Node(2, 1, at(1)), Node(3, 2, at(2)), Node(4, 3, at(3))]

    branch = active_branch(nodes)

    assert branch.ids == (1, 2, 3, 4)
    assert [branch.position(i) for i in branch.ids] == [(1, 1)] * 4


def test_a_regenerated_answer_is_shown_and_the_old_one_kept_as_a_sibling():
    # given: a question, its answer, and the answer regenerated later
    nodes = [Node(1, None, at(0)), Node(2, 1, at(1)), Node(3, 1, at(5))]

    branch = active_branch(nodes)

    assert branch.ids == (1, 3)
    assert branch.siblings[3] == (2, 3)
    assert branch.position(3) == (2, 2)


def test_flipping_back_sticks_and_the_subtree_of_the_chosen_version_follows():
    # the first answer (2) had a follow-up (4 → 5); the regenerated one (3) is newer
    nodes = [
        Node(1, None, at(0)),
        Node(2, 1, at(1), chosen_at=at(10)),  # the reader flipped back to it at 10
        Node(4, 2, at(2)),
        Node(5, 4, at(3)),
        Node(3, 1, at(5)),
    ]

    branch = active_branch(nodes)

    assert branch.ids == (1, 2, 4, 5)
    assert branch.position(2) == (1, 2)


def test_a_version_newer_than_the_last_flip_wins():
    nodes = [Node(1, None, at(0)), Node(2, 1, at(1), chosen_at=at(10)), Node(3, 1, at(11))]

    assert active_branch(nodes).ids == (1, 3)


def test_an_edited_first_question_is_a_sibling_root():
    nodes = [Node(1, None, at(0)), Node(2, 1, at(1)), Node(3, None, at(4)), Node(4, 3, at(5))]

    branch = active_branch(nodes)

    assert branch.ids == (3, 4)
    assert branch.siblings[3] == (1, 3)


def test_ties_are_broken_by_id_and_the_path_walks_up():
    nodes = [Node(1, None, at(0)), Node(2, 1, at(1)), Node(3, 1, at(1))]

    assert active_branch(nodes).ids == (1, 3)
    assert path_to(nodes, 2) == (1, 2)
    assert path_to(nodes, 99) == ()
    assert active_branch([]).ids == ()
