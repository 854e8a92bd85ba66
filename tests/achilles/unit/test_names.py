"""Names and titles (issue 10, finding 12): trimmed, with a visible character (Unicode categories)."""

import pytest

from achilles.names import name_clean

INVISIBLE = [
    "",
    " ",
    "\t",
    "\u200b",
    "\ufeff",
    "\u202e",
    "\u200b\u200c\u200d",
    " \u00a0\u3000 ",
    "\u2066\u2069",
    "\u0301",
    "\u180e",
    "\u2060",
    "\U000e0001",
]


@pytest.mark.parametrize("value", INVISIBLE)
def test_a_name_of_invisible_characters_is_refused(value):
    with pytest.raises(ValueError):
        name_clean(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("  Отчёт  ", "Отчёт"),
        ("\u200bweekly\ufeff", "weekly"),
        ("42", "42"),
        ("—", "—"),
        ("🚀", "🚀"),
        ("a b", "a b"),
        ("\u00a0Δ\u3000", "Δ"),
        ("e\u0301", "e\u0301"),
    ],
)
def test_names_are_trimmed_and_kept(value, expected):
    assert name_clean(value) == expected


@pytest.mark.parametrize("value", ["abc\u202egpj.exe", "line\nbreak", "n\x00ul", "tab\tname", "\u2067x\u2069y"])
def test_controls_and_direction_overrides_are_refused_inside(value):
    with pytest.raises(ValueError):
        name_clean(value)
