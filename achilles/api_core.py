"""Core routes: the caller and their API tokens."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field, field_validator

from achilles import services
from achilles.identity import principals_for
from achilles.models import AgentModel, ApiToken
from achilles.names import name_clean

router = Router(tags=["me"])


class MeOut(Schema):
    id: int
    username: str
    timezone: str
    timezone_is_default: bool
    principals: list[str]
    is_staff: bool


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
    user = request.auth
    return MeOut(id=user.pk, username=user.username, timezone=user.effective_timezone(),
                 timezone_is_default=user.timezone is None, principals=principals_for(user),
                 is_staff=user.is_staff)


class ModelOut(Schema):
    name: str
    provider: str
    kind: str
    context_window: int
    is_default: bool


@router.get("/models", response=list[ModelOut], tags=["models"])
def models_list(request: HttpRequest, kind: str = "chat"):
    """The allow-list: the models conversations and agents may select (chat by default)."""
    return list(AgentModel.objects.filter(kind=kind).order_by("-is_default", "name"))


@router.get("/tokens", response=list[TokenOut], tags=["tokens"])
def tokens_list(request: HttpRequest):
    return list(ApiToken.objects.filter(user=request.auth))


@router.post("/tokens", response={201: TokenCreatedOut}, tags=["tokens"])
def tokens_create(request: HttpRequest, payload: TokenIn):
    token, raw = services.api_token_create(user=request.auth, name=payload.name)
    token.refresh_from_db()
    return Status(201, TokenCreatedOut(**TokenOut.from_orm(token).dict(), token=raw))


@router.delete("/tokens/{token_id}", response={204: None}, tags=["tokens"])
def tokens_revoke(request: HttpRequest, token_id: int):
    services.api_token_revoke(user=request.auth, token_id=token_id)
    return Status(204, None)
