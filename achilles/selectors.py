"""Reads of the platform core: the model allow-list (one selector, one error vocabulary) and the
effective time zone.

Every app picks models here — an agent's ``model``, a conversation's ``selected_model``, the
default for a turn — so one request means one answer and one error code everywhere:

| situation | code | status |
| --- | --- | --- |
| a name that is not on the allow-list | ``unknown_model`` | 422 |
| a model of the other kind (an embedding model as a chat model) | ``wrong_model_kind`` | 422 |
| no name, and no default of that kind | ``no_default_model`` | 422 when the caller asked for a default; 503 when a turn needs one |
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from achilles.errors import ValidationFailed
from achilles.models import AllowedModel, ApiToken, User
from achilles.pagination import DEFAULT_LIMIT, Window, keyset_page
from achilles.platform import platform_settings


class _HasKind(Protocol):
    kind: str


M = TypeVar("M", bound=_HasKind)


def allowed_model_check(name: str, model: M | None, *, kind: str = "chat", field: str | None = None) -> M:
    """The pure rule: ``model`` (the allow-list's row named ``name``, or None) may serve as ``kind``."""
    if model is None:
        raise ValidationFailed(f"model {name!r} is not on the allow-list", code="unknown_model", field=field)
    if model.kind != kind:
        raise ValidationFailed(
            f"model {name!r} is an {model.kind} model, not a {kind} model", code="wrong_model_kind", field=field
        )
    return model


def default_model(*, kind: str = "chat") -> AllowedModel | None:
    """The allow-list's default of ``kind`` (at most one: a partial UNIQUE index), or None."""
    return AllowedModel.objects.filter(kind=kind, is_default=True).first()


def allowed_model_get(*, name: str | None, kind: str = "chat", field: str | None = None) -> AllowedModel:
    """The allow-list's model named ``name`` for ``kind``; no name → the default of that kind."""
    if name is None:
        model = default_model(kind=kind)
        if model is None:
            raise ValidationFailed(
                f"no default {kind} model is configured; name one", code="no_default_model", field=field
            )
        return model
    return allowed_model_check(name, AllowedModel.objects.filter(name=name).first(), kind=kind, field=field)


def effective_timezone(user_timezone: str | None, *, org_timezone: str | None = None) -> str:
    """A user's own time zone, else the organisation's (platform settings): the one rule."""
    if user_timezone:
        return user_timezone
    if org_timezone is not None:
        return org_timezone
    return platform_settings().timezone


def agent_model_page(
    *, kind: str = "chat", cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> Window[AllowedModel]:
    """The allow-list of one kind, the default first, then by name; keyset on (is_default, name)."""
    return keyset_page(
        AllowedModel.objects.filter(kind=kind),
        scope=f"models:{kind}",
        keys=("-is_default", "name"),
        cursor=cursor,
        limit=limit,
    )


def api_token_page_for_user(*, user: User, cursor: str | None = None, limit: int = DEFAULT_LIMIT) -> Window[ApiToken]:
    """The user's tokens (revoked ones too), newest first; keyset on (created_at, id)."""
    return keyset_page(
        ApiToken.objects.filter(user=user), scope="tokens", keys=("-created_at", "-id"), cursor=cursor, limit=limit
    )


def api_token_list_for_user(*, user: User) -> list[ApiToken]:
    """All the user's tokens (revoked ones too), in the model's order: the tokens page."""
    return list(ApiToken.objects.filter(user=user))


def allowed_model_by_id(*, model_id: int) -> AllowedModel | None:
    """The allow-list's row with id ``model_id`` (the seed's ``model_id``), or None."""
    return AllowedModel.objects.filter(pk=model_id).first()


def allowed_model_names(*, ids: Iterable[int]) -> dict[int, str]:
    """Allow-list id → model name, for the ids that exist."""
    wanted = set(ids)
    if not wanted:
        return {}
    return dict(AllowedModel.objects.filter(pk__in=wanted).values_list("pk", "name"))


def user_by_id(*, user_id: int) -> User | None:
    """The user with id ``user_id`` (active or not), or None."""
    return User.objects.filter(pk=user_id).first()


def users_by_ids(*, ids: Iterable[int]) -> list[User]:
    """The users with these ids, in the model's order."""
    wanted = set(ids)
    return list(User.objects.filter(pk__in=wanted)) if wanted else []
