"""The command contract (HUB-5): one pydantic model per command type, a union discriminated by ``type``.

REST, MCP and the sync-agent protocol use these field names. ``commands_parse`` is the one entry:
it validates a list, checks the `$N` references across the batch, and raises ``ValidationFailed``
whose ``detail`` is the human text both REST (422) and MCP (error result) show.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from achilles.errors import ValidationFailed
from achilles.names import text_problem
from syncagent.command_types import COMMAND_TYPES

KEY_PATTERN = r"^([A-Z][A-Z0-9_]*-[0-9]+|\$[1-9][0-9]*)$"
REAL_KEY_RE = re.compile(r"^[A-Z][A-Z0-9_]*-[0-9]+$")
REF_RE = re.compile(r"^\$([1-9][0-9]*)$")
# Jira Server/DC's stock link types (names as `GET issueLinkType` returns them).
LINK_TYPES = ("Blocks", "Cloners", "Duplicate", "Relates")
MAX_COMMANDS = 200


def _one_line(value: str) -> str:
    problem = text_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _lines(value: str) -> str:
    problem = text_problem(value, multiline=True)
    if problem:
        raise ValueError(problem)
    return value


# Texts people read in Jira and in the hub: no control or text-direction characters (a U+202E in a
# summary re-orders what follows it); multi-line ones keep newlines and tabs.
OneLine = AfterValidator(_one_line)
Lines = AfterValidator(_lines)

IssueKey = Annotated[
    str,
    StringConstraints(pattern=KEY_PATTERN, max_length=64),
    Field(description='A Jira key ("AURORA-1538") or "$N": the issue created by command N of this batch.'),
]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), OneLine]


class IssueFields(BaseModel):
    """Jira fields a command may set: the named ones plus custom fields by id (``customfield_10010``)."""

    model_config = ConfigDict(extra="allow")

    summary: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255), OneLine] | None = (
        None
    )
    description: Annotated[str, Lines] | None = None
    priority: Annotated[str, StringConstraints(min_length=1, max_length=100), OneLine] | None = None
    assignee: Annotated[str, StringConstraints(min_length=1, max_length=200), OneLine] | None = None
    duedate: dt.date | None = None
    components: list[Annotated[str, StringConstraints(min_length=1), OneLine]] | None = None

    @model_validator(mode="after")
    def _custom_fields_only(self):
        for name in self.model_extra or {}:
            if not re.fullmatch(r"customfield_[0-9]+", name):
                raise ValueError(
                    f"unknown field «{name}»: allowed are summary, description, priority, assignee, "
                    "duedate, components and customfield_<id>"
                )
        return self


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def issue_keys(self) -> list[str]:
        """Issue keys the command touches, in order (``$N`` as written)."""
        return [k for k in (getattr(self, "key", None), getattr(self, "other_key", None)) if k]


class EnsureIssue(_Base):
    """Create the issue unless one with this project and exact summary (and the base label) exists.
    ``labels`` must carry the project's base label (``AWPCA``): nobody adds it for you."""

    type: Literal["ensure_issue"]
    project: Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]*$", max_length=32)]
    summary: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255), OneLine]
    issue_type: Text = "Task"
    labels: list[Annotated[str, StringConstraints(pattern=r"^\S+$", max_length=255), OneLine]] = Field(
        default_factory=list
    )
    fields: IssueFields = Field(default_factory=IssueFields)


class EnsureFields(_Base):
    type: Literal["ensure_fields"]
    key: IssueKey
    fields: IssueFields

    @field_validator("fields")
    @classmethod
    def _not_empty(cls, value: IssueFields) -> IssueFields:
        if not value.model_dump(exclude_none=True):
            raise ValueError("at least one field to ensure")
        return value


class EnsureLink(_Base):
    type: Literal["ensure_link"]
    key: IssueKey
    link_type: str = Field(description=f"One of {', '.join(LINK_TYPES)}.")
    direction: Literal["outward", "inward"] = "outward"
    other_key: IssueKey

    @field_validator("link_type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        for known in LINK_TYPES:
            if value.strip().casefold() == known.casefold():
                return known
        raise ValueError(f"unknown link type «{value}»; expected one of {', '.join(LINK_TYPES)}")

    @model_validator(mode="after")
    def _two_issues(self):
        if self.key == self.other_key:
            raise ValueError("an issue cannot be linked to itself")
        return self


class EnsureSprint(_Base):
    type: Literal["ensure_sprint"]
    key: IssueKey
    sprint: (
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
        | Annotated[int, Field(ge=1)]
    ) = Field(description="Sprint name («Спринт 2») or numeric id.")

    @field_validator("sprint")
    @classmethod
    def _sprint_name_one_line(cls, value: str | int) -> str | int:
        # After the union (a validator inside it would add the union member's tag to the message).
        return _one_line(value) if isinstance(value, str) else value


class EnsureComment(_Base):
    type: Literal["ensure_comment"]
    key: IssueKey
    body: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=32767), Lines]


class EnsureTransition(_Base):
    type: Literal["ensure_transition"]
    key: IssueKey
    status: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100), OneLine]


class Refresh(_Base):
    """Re-read issues from Jira into the mirror: ``keys`` or ``full: true`` (exactly one)."""

    type: Literal["refresh"]
    keys_: list[IssueKey] | None = Field(default=None, alias="keys", min_length=1, max_length=500)
    full: bool = False

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _keys_or_full(self):
        if self.full == bool(self.keys_):
            raise ValueError("refresh takes either keys or full: true")
        return self

    def issue_keys(self) -> list[str]:
        return list(self.keys_ or [])


Command = Annotated[
    EnsureIssue | EnsureFields | EnsureLink | EnsureSprint | EnsureComment | EnsureTransition | Refresh,
    Field(discriminator="type"),
]
_ADAPTER = TypeAdapter(Command)
COMMAND_JSON_SCHEMA: dict[str, Any] = _ADAPTER.json_schema(by_alias=True)


def command_dump(command) -> dict[str, Any]:
    """The stored and sent shape: the contract's field names, no unset optionals."""
    data = command.model_dump(mode="json", by_alias=True, exclude_none=True)
    if data["type"] == "refresh" and not data.get("full"):
        data.pop("full", None)
    return data


def references(command) -> list[int]:
    """The N of every `$N` the command names, in order, without repeats."""
    seen: list[int] = []
    for key in command.issue_keys():
        match = REF_RE.match(key)
        if match and int(match.group(1)) not in seen:
            seen.append(int(match.group(1)))
    return seen


def _loc(loc: tuple) -> str:
    # Drop the union member's tag pydantic inserts ("ensure_link") so the path reads as the input.
    parts = [str(p) for p in loc if p not in COMMAND_TYPES]
    return ".".join(parts)


def _error_text(index: int, raw: Any, exc: ValidationError) -> str:
    kind = raw.get("type") if isinstance(raw, dict) else None
    head = f"command {index}" + (f" ({kind})" if isinstance(kind, str) and kind in COMMAND_TYPES else "")
    lines = []
    for error in exc.errors():
        if error["type"] == "union_tag_invalid":
            lines.append(f"{head}: unknown command type «{kind}»; expected one of {', '.join(COMMAND_TYPES)}")
            continue
        if error["type"] == "union_tag_not_found":
            lines.append(f"{head}: missing «type»; expected one of {', '.join(COMMAND_TYPES)}")
            continue
        if error["type"] == "model_attributes_type" or (error["type"] == "model_type" and not error["loc"]):
            lines.append(f"{head}: must be an object")
            continue
        where = _loc(error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "required"
        elif error["type"] == "extra_forbidden":
            message = "unknown field"
        elif error["type"] == "string_pattern_mismatch" and where.endswith("key"):
            message = f"«{error.get('input')}» is not an issue key (PROJ-123) or $N"
        lines.append(f"{head}: {where}: {message}" if where else f"{head}: {message}")
    return "\n".join(lines)


def base_label_problems(parsed: list, *, base_label: str) -> list[str]:
    """An ``ensure_issue`` without the base label would create an issue outside the base JQL: the
    mirror never sees it, so its identity search never finds it and every retry creates another."""
    return [
        f"command {index} (ensure_issue): labels: must include the base label «{base_label}» — neither the hub "
        "nor the sync agent adds labels, and an issue without it falls out of the base JQL and the mirror"
        for index, command in enumerate(parsed, start=1)
        if command.type == "ensure_issue" and base_label not in command.labels
    ]


def commands_parse(raw: Any, *, base_label: str | None = None) -> list:
    """Validate a batch's commands; raise ``ValidationFailed`` with the human text, else the models.

    ``base_label`` (the hub setting): every ``ensure_issue`` must carry it in ``labels``."""
    if not isinstance(raw, list):
        raise ValidationFailed("commands must be a list of command objects")
    if not raw:
        raise ValidationFailed("commands must not be empty")
    if len(raw) > MAX_COMMANDS:
        raise ValidationFailed(f"at most {MAX_COMMANDS} commands per batch (got {len(raw)})")
    parsed, problems = [], []
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            problems.append(f"command {index}: must be an object")
            continue
        try:
            parsed.append(_ADAPTER.validate_python(item))
        except ValidationError as exc:
            problems.append(_error_text(index, item, exc))
    if problems:
        raise ValidationFailed("\n".join(problems))
    for index, command in enumerate(parsed, start=1):
        for n in references(command):
            if n >= index:
                problems.append(f"command {index} ({command.type}): ${n} must name an earlier command of the batch")
            elif parsed[n - 1].type != "ensure_issue":
                problems.append(
                    f"command {index} ({command.type}): ${n} names command {n} ({parsed[n - 1].type}), "
                    "which creates no issue; $N must name an ensure_issue"
                )
    if base_label is not None:
        problems += base_label_problems(parsed, base_label=base_label)
    if problems:
        raise ValidationFailed("\n".join(problems))
    return parsed
