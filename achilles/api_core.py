"""Core routes: the caller and their API tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field, StrictBool, field_validator

from achilles import __version__, notifications, selectors, services
from achilles.identity import principals_for
from achilles.names import name_clean
from achilles.pagination import ListParams, Page

router = Router(tags=["me"])


class MeOut(Schema):
    id: int
    username: str
    timezone: str
    timezone_is_default: bool
    principals: list[str]
    is_staff: bool
    source: str = Field(
        description="where the account comes from: local, ldap or oidc (groups and state follow the directory)"
    )
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    groups: list[str] = Field(default_factory=list, description="the account's groups, by name")
    profile_read_only: bool = Field(
        False, description="name and e-mail come from the directory (ldap, oidc) and cannot be changed here"
    )
    notify_by_email: bool = Field(False, description="the notices are e-mailed too (when mail is configured)")
    language: Literal["", "ru", "en"] = Field(
        "", description="the interface language chosen (ru, en); empty: the browser's Accept-Language"
    )


class MePatch(Schema):
    """Any of the fields; name and e-mail only for local accounts (422 ``directory_owned`` otherwise)."""

    model_config = {"extra": "forbid"}

    first_name: str | None = Field(None, max_length=150)
    last_name: str | None = Field(None, max_length=150)
    email: str | None = Field(None, max_length=254)
    timezone: str | None = Field(None, description="an IANA zone such as Europe/Moscow; null: the organisation's")
    notify_by_email: StrictBool | None = Field(None, description="e-mail the notices too (when mail is configured)")
    language: Literal["", "ru", "en"] | None = Field(
        None, description="the interface language: ru or en; empty or null: the browser's Accept-Language"
    )


class TokenIn(Schema):
    name: str = Field(min_length=1, max_length=100)

    @field_validator("name")
    @classmethod
    def visible(cls, value: str) -> str:
        return name_clean(value)  # trimmed, with a visible character (achilles.names)


class TokenOut(Schema):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class TokenCreatedOut(TokenOut):
    token: str


@router.get("/me", response=MeOut)
def me(request: HttpRequest):
    return _me(request.auth)


@router.patch("/me", response=MeOut)
def me_update(request: HttpRequest, payload: MePatch):
    """The settings page: name, e-mail (local accounts), time zone (422 ``invalid_timezone`` for an unknown zone),
    notices by e-mail, the interface language."""
    user = services.user_profile_update(
        user=request.auth, changes={field: getattr(payload, field) for field in payload.model_fields_set}
    )
    return _me(user)


def _me(user) -> MeOut:
    return MeOut(
        id=user.pk,
        username=user.username,
        timezone=user.effective_timezone(),
        timezone_is_default=user.timezone is None,
        principals=principals_for(user),
        is_staff=user.is_staff,
        source=user.source,
        first_name=user.first_name,
        last_name=user.last_name,
        email=user.email,
        groups=sorted(user.groups.values_list("name", flat=True)),
        profile_read_only=user.source != "local",
        notify_by_email=user.notify_by_email,
        language=user.language,
    )


class ModelOut(Schema):
    name: str
    provider: str
    kind: str
    context_window: int
    is_default: bool


class ModelListParams(ListParams):
    kind: str = "chat"


@router.get("/models", response=Page[ModelOut], tags=["models"])
def models_list(request: HttpRequest, params: Query[ModelListParams]):
    """The allow-list: the models conversations and agents may select (chat by default), the default first."""
    return selectors.agent_model_page(kind=params.kind, cursor=params.cursor, limit=params.limit)


@router.get("/tokens", response=Page[TokenOut], tags=["tokens"])
def tokens_list(request: HttpRequest, params: Query[ListParams]):
    """Your tokens, newest first (revoked ones too, with ``revoked_at``)."""
    return selectors.api_token_page_for_user(user=request.auth, cursor=params.cursor, limit=params.limit)


@router.post("/tokens", response={201: TokenCreatedOut}, tags=["tokens"])
def tokens_create(request: HttpRequest, payload: TokenIn):
    token, raw = services.api_token_create(user=request.auth, name=payload.name)
    token.refresh_from_db()
    return Status(201, TokenCreatedOut(**TokenOut.from_orm(token).dict(), token=raw))


@router.delete("/tokens/{token_id}", response={204: None}, tags=["tokens"])
def tokens_revoke(request: HttpRequest, token_id: int):
    services.api_token_revoke(user=request.auth, token_id=token_id)
    return Status(204, None)


class VersionOut(Schema):
    version: str = Field(description="The release (CHANGELOG.md), e.g. 0.1.0")


@router.get("/version", response=VersionOut, tags=["platform"])
def version(request: HttpRequest):
    """The running release (``achilles.__version__``); behind the same sign-in as every route."""
    return {"version": __version__}


class NotificationOut(Schema):
    id: int
    kind: str = Field(description="agent_run or hub_batch")
    title: str
    body: str
    link: str = Field(description="a path in the web app, or empty")
    created_at: datetime
    read_at: datetime | None


class UnreadOut(Schema):
    count: int


@router.get("/notifications", response=Page[NotificationOut], tags=["notifications"])
def notifications_list(request: HttpRequest, params: Query[ListParams]):
    """Your notices (an agent run of yours ended, a batch of yours finished), newest first."""
    return notifications.notification_page_for_user(user=request.auth, cursor=params.cursor, limit=params.limit)


@router.get("/notifications/unread", response=UnreadOut, tags=["notifications"])
def notifications_unread(request: HttpRequest):
    """How many of your notices are unread (the bell's count)."""
    return {"count": notifications.notification_unread_count(user=request.auth)}


@router.post("/notifications/read-all", response=UnreadOut, tags=["notifications"])
def notifications_read_all(request: HttpRequest):
    """Mark all your notices read; answers the unread count (0)."""
    notifications.notifications_mark_all_read(user=request.auth)
    return {"count": notifications.notification_unread_count(user=request.auth)}


@router.post("/notifications/{int:notification_id}/read", response=NotificationOut, tags=["notifications"])
def notifications_read(request: HttpRequest, notification_id: int):
    """Mark one of your notices read (404 for another person's)."""
    return notifications.notification_mark_read(user=request.auth, notification_id=notification_id)
