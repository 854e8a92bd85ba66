"""The command contract (HUB-5): every type parses, every malformed command is refused with readable text."""

import pytest

from achilles.errors import ValidationFailed
from hub.command_contract import COMMAND_JSON_SCHEMA, command_dump, commands_parse, references


def _error(raw) -> str:
    with pytest.raises(ValidationFailed) as exc:
        commands_parse(raw)
    assert isinstance(exc.value.detail, str)
    return exc.value.detail


def test_every_type_of_the_contract_parses_and_dumps_in_its_own_shape():
    raw = [
        {
            "type": "ensure_issue",
            "project": "AURORA",
            "summary": "Новая",
            "issue_type": "Task",
            "labels": ["AWPCA"],
            "fields": {
                "description": "d",
                "priority": "High",
                "assignee": "jdoe",
                "duedate": "2026-12-01",
                "components": ["api"],
                "customfield_10010": "x",
            },
        },
        {"type": "ensure_fields", "key": "$1", "fields": {"duedate": "2026-12-02"}},
        {"type": "ensure_link", "key": "AURORA-1538", "link_type": "Blocks", "direction": "inward", "other_key": "$1"},
        {"type": "ensure_sprint", "key": "AURORA-1538", "sprint": "Спринт 2"},
        {"type": "ensure_sprint", "key": "AURORA-1538", "sprint": 17},
        {"type": "ensure_comment", "key": "AURORA-1538", "body": "готово"},
        {"type": "ensure_transition", "key": "AURORA-1538", "status": "In Progress"},
        {"type": "refresh", "keys": ["AURORA-1538"]},
        {"type": "refresh", "full": True},
    ]
    parsed = commands_parse(raw)
    dumped = [command_dump(c) for c in parsed]
    assert dumped[0]["fields"]["customfield_10010"] == "x"
    assert dumped[3] == {"type": "ensure_sprint", "key": "AURORA-1538", "sprint": "Спринт 2"}
    assert dumped[4]["sprint"] == 17
    assert dumped[7] == {"type": "refresh", "keys": ["AURORA-1538"]}
    assert dumped[8] == {"type": "refresh", "full": True}
    assert references(parsed[1]) == [1] and references(parsed[2]) == [1]


def test_link_type_is_case_insensitive_but_normalised():
    parsed = commands_parse([{"type": "ensure_link", "key": "A-1", "link_type": "blocks", "other_key": "A-2"}])
    assert command_dump(parsed[0])["link_type"] == "Blocks"
    assert command_dump(parsed[0])["direction"] == "outward"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ([{"type": "ensure_everything", "key": "A-1"}], "unknown command type «ensure_everything»"),
        ([{"key": "A-1"}], "missing «type»"),
        ([{"type": "ensure_fields", "fields": {"duedate": "2026-12-01"}}], "command 1 (ensure_fields): key: required"),
        ([{"type": "ensure_fields", "key": "aurora 1", "fields": {"priority": "High"}}], "is not an issue key"),
        (
            [{"type": "ensure_link", "key": "A-1", "link_type": "Blocked-by-cat", "other_key": "A-2"}],
            "unknown link type «Blocked-by-cat»",
        ),
        (
            [{"type": "ensure_link", "key": "A-1", "link_type": "Blocks", "direction": "sideways", "other_key": "A-2"}],
            "direction",
        ),
        ([{"type": "ensure_link", "key": "A-1", "link_type": "Blocks", "other_key": "A-1"}], "linked to itself"),
        ([{"type": "ensure_fields", "key": "A-1", "fields": {"colour": "red"}}], "unknown field «colour»"),
        ([{"type": "ensure_fields", "key": "A-1", "fields": {}}], "at least one field"),
        ([{"type": "ensure_fields", "key": "A-1", "fields": {"duedate": "tomorrow"}}], "duedate"),
        ([{"type": "ensure_issue", "project": "AURORA", "summary": "  "}], "summary"),
        ([{"type": "ensure_comment", "key": "A-1", "body": "x", "extra": 1}], "extra: unknown field"),
        ([{"type": "refresh"}], "either keys or full"),
        ([{"type": "refresh", "keys": ["A-1"], "full": True}], "either keys or full"),
        ([{"type": "ensure_comment", "key": "$1", "body": "x"}], "$1 must name an earlier command"),
        (
            [
                {"type": "ensure_comment", "key": "A-1", "body": "x"},
                {"type": "ensure_comment", "key": "$1", "body": "y"},
            ],
            "which creates no issue",
        ),
        ([], "must not be empty"),
        ("ensure_issue", "must be a list"),
        ([7], "command 1: must be an object"),
    ],
)
def test_malformed_commands_are_refused_with_the_reason(raw, expected):
    assert expected in _error(raw)


def test_every_problem_of_a_batch_is_listed_with_its_position():
    text = _error(
        [
            {"type": "ensure_comment", "key": "A-1", "body": "ok"},
            {"type": "nope"},
            {"type": "ensure_transition", "key": "A-1"},
        ]
    )
    assert "command 2: unknown command type «nope»" in text
    assert "command 3 (ensure_transition): status: required" in text


def test_the_json_schema_is_a_discriminated_union_of_the_seven_types():
    mapping = COMMAND_JSON_SCHEMA["discriminator"]["mapping"]
    assert set(mapping) == {
        "ensure_issue",
        "ensure_fields",
        "ensure_link",
        "ensure_sprint",
        "ensure_comment",
        "ensure_transition",
        "refresh",
    }


COMMENT_FIRST = {"type": "ensure_comment", "key": "AURORA-1", "body": "x"}


def test_ensure_issue_must_carry_the_base_label_it_is_given():
    command = {"type": "ensure_issue", "project": "AURORA", "summary": "s"}
    commands_parse([command])  # the contract alone does not know the setting
    with pytest.raises(ValidationFailed) as refused:
        commands_parse([COMMENT_FIRST, command | {"labels": ["awpca"]}], base_label="AWPCA")
    assert str(refused.value.detail).startswith("command 2 (ensure_issue): labels: must include the base label «AWPCA»")
    assert commands_parse([command | {"labels": ["x", "AWPCA"]}], base_label="AWPCA")


@pytest.mark.parametrize(
    "raw, where",
    [
        ({"type": "ensure_issue", "project": "AURORA", "summary": "a\u202eb"}, "summary"),
        ({"type": "ensure_issue", "project": "AURORA", "summary": "s", "labels": ["AW\u202ePCA"]}, "labels.0"),
        ({"type": "ensure_transition", "key": "AURORA-1", "status": "Done\u2066"}, "status"),
        ({"type": "ensure_sprint", "key": "AURORA-1", "sprint": "Спринт\n2"}, "sprint"),
        ({"type": "ensure_fields", "key": "AURORA-1", "fields": {"components": ["a\x07"]}}, "fields.components.0"),
    ],
)
def test_control_and_direction_characters_are_refused_naming_the_field(raw, where):
    with pytest.raises(ValidationFailed) as refused:
        commands_parse([raw])
    assert f": {where}: must not contain control or text-direction characters" in str(refused.value.detail)
