"""Names and titles (issue 10, finding 12): trimmed, with a visible character (Unicode categories)."""

import pytest

from achilles.names import name_clean, text_problem

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


@pytest.mark.parametrize(
    ("value", "multiline", "offender"),
    [
        ("abc\u202egpj.exe", False, "U+202E"),
        ("a\u2066b", True, "U+2066"),
        ("line\nbreak", False, "U+000A"),
        ("tab\there", False, "U+0009"),
        ("esc\x1b[2J", True, "U+001B"),
        ("c1\x85x", True, "U+0085"),
        ("lone\rreturn", True, "U+000D"),
    ],
)
def test_text_problem_names_the_first_control_or_direction_character(value, multiline, offender):
    assert text_problem(value, multiline=multiline) == (
        f"must not contain control or text-direction characters ({offender})"
    )


@pytest.mark.parametrize("value", ["строка 1\nстрока 2", "a\r\nb", "\tпункт", "🚀 — ok"])
def test_multi_line_texts_keep_newlines_and_tabs(value):
    assert text_problem(value, multiline=True) is None
