"""Ninja schemas of the agents API. ``extra="forbid"``: ``trigger``/``state`` or any unknown field
in a body is a 422, never silently dropped. ``schedule`` is a discriminated union on ``type``."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool, StrictInt, field_validator

from achilles.names import name_clean

HHMM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


class _Strict(Schema):
    model_config = ConfigDict(extra="forbid")


class IntervalSchedule(_Strict):
    type: Literal["interval"]
    every_minutes: StrictInt = Field(ge=1, le=60 * 24 * 366)


class CalendarSchedule(_Strict):
    type: Literal["calendar"]
    weekday: StrictInt = Field(ge=0, le=6, description="Monday = 0 … Sunday = 6")
    time: str = Field(description="HH:MM in the owner's time zone")

    @field_validator("time")
    @classmethod
    def _hhmm(cls, value: str) -> str:
        if not HHMM.match(value):
            raise ValueError("time must be HH:MM (00:00–23:59)")
        return value


ScheduleIn = Annotated[IntervalSchedule | CalendarSchedule, Field(discriminator="type")]


def _name_not_blank(value: str | None) -> str | None:
    # trimmed, with a visible character (achilles.names): no names of spaces, zero-width or RTL marks
    return name_clean(value) if value is not None else None


class AgentIn(_Strict):
    name: str = Field(min_length=1, max_length=200)
    instructions: str = Field(default="", max_length=20_000)
    model: str | None = Field(
        default=None, description="A chat model's name from the allow-list; omitted → the default"
    )
    model_id: StrictInt | None = Field(
        default=None,
        description="The same model by its allow-list id (the seed's field); "
        "with ``model`` too, both must name one model",
    )
    schedule: ScheduleIn | None = None
    enabled: StrictBool = True
    # Accepted only to answer an owner's attempt with 403 rather than a 422 (the lock is admin-only).
    admin_paused: StrictBool | None = Field(default=None, json_schema_extra={"readOnly": True})

    _name = field_validator("name")(_name_not_blank)


class AgentPatch(_Strict):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    instructions: str | None = Field(default=None, max_length=20_000)
    model: str | None = None
    model_id: int | None = None
    schedule: ScheduleIn | None = None
    enabled: StrictBool | None = None
    admin_paused: StrictBool | None = Field(default=None, json_schema_extra={"readOnly": True})

    _name = field_validator("name")(_name_not_blank)


class AgentOut(Schema):
    id: int
    name: str
    instructions: str
    model: str | None
    model_id: int | None
    schedule: dict | None
    enabled: bool
    admin_paused: bool
    status: str
    next_run_at: datetime | None
    next_runs: list[datetime] = Field(description="The next 5 run times (UTC) while the gates are open")
    timezone: str = Field(description="The zone calendar times are read in (the owner's, else the org's)")
    can_run: bool = Field(description="Whether «run now» would be accepted at this moment")
    cannot_run_reason: str | None = Field(
        description="Why not: the code POST /run would answer with "
        "(agent_paused, agent_disabled, model_missing, "
        "budget_exceeded, already_running)"
    )
    created_at: datetime
    updated_at: datetime


class AgentAdminOut(AgentOut):
    owner: str
    owner_id: int
    owner_active: bool


class SubscriptionIn(_Strict):
    """Wake the agent on hub events: a Jira issue created, updated or transitioned in the mirror."""

    events: list[Literal["created", "updated", "transitioned"]] = Field(min_length=1, max_length=3)
    project: str = Field("", max_length=32, description="Jira project key; empty = any")
    issue_type: str = Field("", max_length=100, description="Issue type; empty = any")
    status: str = Field("", max_length=100, description="The status after the change; empty = any")
    label: str = Field("", max_length=255, description="A label the issue carries; empty = any")
    debounce_seconds: StrictInt = Field(
        60, ge=0, le=3600, description="Changes to one issue within this period: one run"
    )


class SubscriptionOut(Schema):
    id: int
    events: list[str]
    project: str
    issue_type: str
    status: str
    label: str
    debounce_seconds: int
    created_at: datetime


class RunEventOut(Schema):
    """A hub event a run carries: the issue, what happened, what changed (field → [before, after])."""

    issue_key: str
    kinds: list[str]
    changes: dict
    hits: int = Field(description="How many mirror changes were coalesced into this event (debounce)")
    created_at: datetime


class RunSourceOut(Schema):
    """A source the run's output cites with ``[marker]``; ``available: false`` (and nothing of it)
    when the reader may not read its record now."""

    marker: int
    record_id: int | None
    title: str
    url: str
    source_system: str
    source_label: str = Field(default="", description="The source as people know it («Файлы», «Confluence»).")
    chunk_text: str
    available: bool


class RunOut(Schema):
    id: int
    agent_id: int
    trigger: str
    state: str
    reason: str
    output: str
    error: str
    tokens_used: int
    # the split of tokens_used (null on runs from before it was stored) and the model the run called
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None
    scheduled_for: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    created_at: datetime
    events: list[RunEventOut] = Field(default_factory=list, description="trigger=event: the events that started it")
    # the output rendered and sanitised like a chat answer, its [N] markers linked to the cards
    output_html: str = ""
    sources: list[RunSourceOut] = Field(default_factory=list, description="What the output's [N] markers cite.")

    @staticmethod
    def resolve_output_html(obj: Any) -> str:
        return getattr(obj, "output_html", "")

    @staticmethod
    def resolve_sources(obj: Any) -> list:
        # only what the API checked against the reader's access (``agents.api``): never the raw copies
        return getattr(obj, "sources_checked", [])

    @staticmethod
    def resolve_events(obj: Any) -> list:
        events = getattr(obj, "events", None)
        return list(events.all()) if events is not None and hasattr(events, "all") else []


class RunCreatedOut(Schema):
    run_id: int
    agent_id: int
    state: str
    trigger: str
