"""Request/response schemas of the hub's REST (people) and of the sync-agent protocol (PROTOCOL.md)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import (
    AfterValidator,
    Base64Bytes,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SkipValidation,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    model_validator,
)

from achilles.datetimes import offset_in_range
from hub.command_contract import Command


def _jira_datetime(value: Any) -> Any:
    # Jira writes "2026-11-30T11:50:00.000+0000"; ISO 8601 wants "+00:00". Slicing, not re.sub: a
    # mirror page has ~3 000 of these and re.sub's template expansion was a fifth of an upload's time.
    if isinstance(value, str):
        value = value.strip()
        if len(value) >= 5 and value[-5] in "+-" and value[-4:].isdigit() and value[-4:].isascii():
            return f"{value[:-2]}:{value[-2:]}"
    return value


JiraDateTime = Annotated[dt.datetime, BeforeValidator(_jira_datetime), AfterValidator(offset_in_range)]
Key = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]*-[0-9]+$", max_length=64)]
ProjectKey = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]*$", max_length=32)]


# ---------------------------------------------------------------- people


class BatchIn(Schema):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(description="What the batch is for; shown in batches and batch_status.")
    # Validated by hub.command_contract.commands_parse so REST and MCP give the same 422 text; the schema is
    # still published in the OpenAPI.
    commands: SkipValidation[list[Command]] = Field(
        description="Commands of the contract, run in order. `ensure_issue` must carry the project's base label "
        "(`AWPCA`) in `labels`: neither the hub nor the sync agent adds labels, and an issue without it "
        'falls out of the base JQL and the mirror. `"key": "$N"` names the issue command N creates.'
    )
    author: str | None = Field(
        default=None,
        description="Who asks; omitted → `api`. Staff and service accounts (`hub.name_batch_author`) only: "
        "anyone else naming an author gets a 403.",
    )


class BatchCreatedOut(Schema):
    id: int
    estimate_seconds: int
    command_count: int


class RefreshIn(Schema):
    model_config = ConfigDict(extra="forbid")

    keys: list[str] | None = None
    full: StrictBool = False
    author: str | None = None


class CommandCancelIn(Schema):
    model_config = ConfigDict(extra="forbid")

    force: StrictBool = False


class RetryIn(Schema):
    model_config = ConfigDict(extra="forbid")

    author: str | None = None


class SettingIn(Schema):
    model_config = ConfigDict(extra="forbid")

    value: Any


class SettingsVersionOut(Schema):
    settings_version: int


class PublicationIn(Schema):
    model_config = ConfigDict(extra="forbid")

    version: StrictInt = Field(ge=1)
    notes: str = Field(default="", max_length=20000)
    # The API takes JSON only: the .tar.gz travels base64-encoded (pydantic decodes it to bytes).
    artifact_base64: Base64Bytes = Field(description="The sync agent's .tar.gz, base64")


class BatchCancelOut(Schema):
    batch: dict
    cancelled: list[int]
    claimed: list[int]
    lines: list[str]


# ---------------------------------------------------------------- sync agent


class _Protocol(Schema):
    # Forward compatible: a newer sync agent may send fields this hub does not know yet.
    model_config = ConfigDict(extra="ignore")


class UpdateIn(_Protocol):
    state: Literal["idle", "downloading", "starting", "done", "rolled_back", "failed"]
    from_version: StrictInt | None = Field(default=None, ge=1)
    to_version: StrictInt | None = Field(default=None, ge=1)
    error: str | None = Field(default=None, max_length=4000)


class ClaimIn(_Protocol):
    version: StrictInt = Field(ge=1)
    launcher_version: StrictInt | None = Field(default=None, ge=1)
    max_commands: StrictInt = Field(default=20, ge=1, le=100)
    settings_version: StrictInt | None = Field(default=None, ge=0)
    update: UpdateIn | None = None


class ClaimedCommandOut(Schema):
    id: int
    batch_id: int
    seq: int
    claims: int
    lease_token: str
    lease_expires_at: dt.datetime
    command: dict


class PublicationOut(Schema):
    version: int
    sha256: str
    size: int
    notes: str
    published_at: dt.datetime
    download_url: str


class ClaimOut(Schema):
    commands: list[ClaimedCommandOut]
    cancelled: list[int]
    settings_version: int
    settings: dict | None
    publication: PublicationOut | None
    server_time: dt.datetime


class ResultIn(_Protocol):
    command_id: StrictInt = Field(ge=1)
    lease_token: str = Field(min_length=1, max_length=64)
    status: Literal["done", "failed"]
    result: dict | None = None
    error: str | None = Field(default=None, max_length=20000)


class RateLimitedIn(_Protocol):
    at: JiraDateTime
    retry_after_seconds: StrictFloat = Field(default=0, ge=0, le=86400)
    path: str = Field(default="", max_length=500)


class ReportIn(_Protocol):
    results: list[ResultIn] = Field(default_factory=list, max_length=500)
    rate_limited: list[RateLimitedIn] = Field(default_factory=list, max_length=10000)

    @model_validator(mode="after")
    def _one_result_per_command(self):
        ids = [r.command_id for r in self.results]
        if len(ids) != len(set(ids)):
            raise ValueError("each command_id at most once per report")
        return self


class ReportOutcome(Schema):
    command_id: int
    outcome: Literal["applied", "duplicate", "ignored"]


class ReportOut(Schema):
    results: list[ReportOutcome]


class SyncRunIn(_Protocol):
    kind: Literal["incremental", "full", "refresh"]


class SyncRunCreatedOut(Schema):
    id: int


class SyncRunFinishIn(_Protocol):
    status: Literal["ok", "failed"]
    counts: dict[str, Annotated[StrictInt, Field(ge=0)]] = Field(default_factory=dict)
    errors: list[Annotated[str, StringConstraints(max_length=4000)]] = Field(default_factory=list, max_length=1000)


class _PageItem(BaseModel):
    # The items of a mirror page are plain pydantic models, not ninja Schemas: ninja's per-object
    # root validator (a DjangoGetter for ORM input) cost ~0.3 s of a 500-issue page and does nothing
    # for JSON. Forward compatible like _Protocol.
    model_config = ConfigDict(extra="ignore")


class LinkIn(_PageItem):
    link_type: str = Field(min_length=1, max_length=100)
    direction: Literal["outward", "inward"]
    other_key: Key


class CommentIn(_PageItem):
    id: Annotated[
        str,
        BeforeValidator(lambda v: str(v) if isinstance(v, int) else v),
        StringConstraints(min_length=1, max_length=64),
    ]
    author: str | None = Field(default=None, max_length=200)
    created: JiraDateTime | None = None
    body: str | None = None


class IssueIn(_PageItem):
    key: Key
    project: ProjectKey
    summary: str = Field(default="", max_length=10000)
    status: str | None = Field(default=None, max_length=100)
    issue_type: str | None = Field(default=None, max_length=100)
    priority: str | None = Field(default=None, max_length=100)
    assignee: str | None = Field(default=None, max_length=200)
    duedate: dt.date | None = None
    sprint: Any = None
    labels: list[Annotated[str, StringConstraints(max_length=255)]] = Field(default_factory=list)
    updated: JiraDateTime
    fields: dict = Field(default_factory=dict)
    links: list[LinkIn] = Field(default_factory=list, max_length=1000)
    comments: list[CommentIn] = Field(default_factory=list, max_length=5000)

    @model_validator(mode="after")
    def _key_in_project(self):
        if self.key.split("-", 1)[0] != self.project:
            raise ValueError(f"key {self.key} is not in project {self.project}")
        return self


class UploadIn(_Protocol):
    sync_run_id: StrictInt | None = Field(default=None, ge=1)
    issues: list[IssueIn] = Field(max_length=500)


class UploadOut(Schema):
    upserted: int
    unchanged: int
    stale: int
