"""Source labels: an admin's own, else the kind's default, else the key."""

import pytest

from knowledge.source_labels import source_label

pytestmark = [pytest.mark.unit]


@pytest.mark.parametrize(
    ("source_system", "label"),
    [
        ("uploads", "Файлы"),
        ("files", "Файлы"),
        ("confluence", "Confluence"),
        ("confluence:7", "Confluence"),
        ("jira", "Jira"),
        ("hr-private", "hr-private"),
    ],
)
def test_default_labels(source_system, label):
    assert source_label(source_system) == label


def test_an_admins_label_wins():
    assert source_label("confluence:7", {"confluence:7": "Вики отдела продаж"}) == "Вики отдела продаж"
    assert source_label("uploads", {"uploads": ""}) == "Файлы"
