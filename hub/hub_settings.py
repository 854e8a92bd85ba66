"""Hub settings (HUB-15): one validator per key, defaults, and the monotonic ``settings_version``."""

from __future__ import annotations

import re
from typing import Annotated, Any

from celery.schedules import crontab
from pydantic import AfterValidator, BaseModel, Field, StringConstraints, TypeAdapter, ValidationError, field_validator

from achilles.errors import ValidationFailed

ProjectKey = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]*$", max_length=32)]
# The principals of ``achilles.identity.principals_for`` a project ACL may name, in the form the hub
# and the Knowledge Store compare verbatim: ``user:<id>`` (not a username: the store would resolve it,
# the hub's routes could not), ``group:<name>``, ``everyone``. Not ``public``: mirrored Jira issues are
# for signed-in people only (anonymous knowledge search would otherwise find them).
# (a group name without spaces, as the Knowledge Store's principals are)
PRINCIPAL_RE = re.compile(r"^(everyone|user:[1-9][0-9]{0,18}|group:[^\s\x1f]{1,150})$")
PRINCIPAL_HELP = "a principal: everyone, group:<name> (no spaces) or user:<id> (a number)"


def _principal(value: str) -> str:
    if value == "public":
        raise ValueError("«public» would open mirrored issues to anonymous callers; use everyone (signed-in people)")
    if not PRINCIPAL_RE.match(value):
        raise ValueError(f"«{value}» is not {PRINCIPAL_HELP}")
    return value


Principal = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_principal)]


class _Cron(BaseModel):
    value: str

    @field_validator("value")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        parts = value.split()
        if len(parts) != 5:
            raise ValueError("a cron expression has 5 fields: minute hour day-of-month month day-of-week")
        try:
            crontab(*parts[:2], day_of_month=parts[2], month_of_year=parts[3], day_of_week=parts[4])
        except Exception as exc:  # celery raises ValueError/ParseException for bad fields
            raise ValueError(f"not a valid cron expression: {exc}") from None
        return " ".join(parts)


SPECS: dict[str, tuple[Any, Any, str]] = {
    "base_label": (
        Annotated[str, StringConstraints(pattern=r"^\S+$", min_length=1, max_length=255)],
        "AWPCA",
        "the label every hub-made issue carries; the base JQL selects by it",
    ),
    "poll_interval_seconds": (Annotated[int, Field(ge=1, le=3600, strict=True)], 10, "how often the sync agent claims"),
    "lease_seconds": (Annotated[int, Field(ge=10, le=3600, strict=True)], 120, "a claimed command's lease"),
    "full_sync_cron": (str, "0 3 * * *", "when the sync agent runs a full sync (5-field cron, UTC)"),
    "projects": (Annotated[list[ProjectKey], Field(min_length=1, max_length=100)], ["AURORA"], "mirrored projects"),
    "project_acl": (
        dict[ProjectKey, Annotated[list[Principal], Field(min_length=1)]],
        {},
        "project → principals who may read its issues, in the hub and the Knowledge Store (missing = everyone)",
    ),
    "sync_overlap_minutes": (Annotated[int, Field(ge=0, le=60, strict=True)], 2, "incremental sync re-read window"),
    "page_size": (Annotated[int, Field(ge=10, le=500, strict=True)], 100, "issues per upload page"),
}
# Settings whose 422 names the element at fault as a field (``detail: [{"loc": [...]}]``).
FIELD_ERRORS = frozenset({"project_acl"})
_ADAPTERS = {key: TypeAdapter(spec[0]) for key, spec in SPECS.items()}
DEFAULTS: dict[str, Any] = {key: spec[1] for key, spec in SPECS.items()}


def setting_validate(*, key: str, value: Any) -> Any:
    """The normalised value, or ``ValidationFailed`` naming the key and what is wrong."""
    if key not in SPECS:
        raise ValidationFailed(f"unknown setting «{key}»; known: {', '.join(SPECS)}")
    try:
        if key == "full_sync_cron":
            if not isinstance(value, str):
                raise ValidationFailed("full_sync_cron: a string like «0 3 * * *»")
            return _Cron(value=value).value
        return _ADAPTERS[key].validate_python(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"] if p not in ("value", "[key]"))
        message = error["msg"].removeprefix("Value error, ")
        if "[key]" in error["loc"]:  # a dict key (a project) is at fault, not its value
            message = "not a project key (A–Z, 0–9 and _, starting with a letter; like AURORA)"
        if key in FIELD_ERRORS:
            # the REST body is {"value": …}: the location names the element (body.value.AURORA.0)
            raise ValidationFailed(
                f"{key}{'.' + where if where else ''}: {message}", field="value" + ("." + where if where else "")
            ) from None
        raise ValidationFailed(f"{key}{'.' + where if where else ''}: {message}") from None
