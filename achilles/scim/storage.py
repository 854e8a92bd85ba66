"""scim2-server's storage over the platform's tables: SCIM resources in, service calls out.

Users are the ``scim``-provisioned accounts not deleted through SCIM (``ScimUser``); groups are the
groups SCIM made (``ScimGroup``). Searches run in PostgreSQL: the filter is translated into a
``Q`` for the attributes listed in ``USER_FILTERS`` / ``GROUP_FILTERS`` (any other attribute is
``invalidFilter``), so a provider's ``userName eq`` lookup is one indexed query however many
accounts there are. The platform's domain errors become SCIM's: a 409 is ``uniqueness``, a 422
``invalidValue`` (400), a 404 ``NotFound``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from scim2_models import (
    Context,
    InvalidFilterException,
    InvalidValueException,
    Meta,
    NotFoundException,
    NotImplementedException,
    Resource,
    ResourceType,
    ResponseParameters,
    SearchRequest,
    UniquenessException,
)
from scim2_models.path import CompareOperator, Comparison, LogicalExpr, LogicalOperator, Not, Present
from scim2_server.storage import ScimStorage, SearchPage

from achilles.audit import Actor
from achilles.errors import Conflict, NotFound, ValidationFailed
from achilles.models import ScimGroup, ScimUser, User
from achilles.scim import services

# SCIM attribute (lower case, without the schema URN) → (lookup, how it compares)
USER_FILTERS: dict[str, tuple[str, str]] = {
    "id": ("pk", "id"),
    "username": ("username", "text"),
    "externalid": ("scim__external_id", "exact"),
    "emails": ("email", "text"),
    "emails.value": ("email", "text"),
    "name.givenname": ("first_name", "text"),
    "name.familyname": ("last_name", "text"),
    "displayname": ("scim__attributes__displayName", "text"),
    "active": ("is_active", "bool"),
}
GROUP_FILTERS: dict[str, tuple[str, str]] = {
    "id": ("pk", "id"),
    "displayname": ("name", "text"),
    "externalid": ("scim__external_id", "exact"),
    "members": ("user__pk", "id"),
    "members.value": ("user__pk", "id"),
}
_TEXT = {
    CompareOperator.eq: "iexact",
    CompareOperator.co: "icontains",
    CompareOperator.sw: "istartswith",
    CompareOperator.ew: "iendswith",
}
_EXACT = {
    CompareOperator.eq: "exact",
    CompareOperator.co: "contains",
    CompareOperator.sw: "startswith",
    CompareOperator.ew: "endswith",
}
_ORDER = {CompareOperator.gt: "gt", CompareOperator.ge: "gte", CompareOperator.lt: "lt", CompareOperator.le: "lte"}


def filter_q(node: Any, table: dict[str, tuple[str, str]]) -> Q:
    """A SCIM filter's syntax tree as a ``Q`` (RFC 7644 §3.4.2.2), for the attributes of ``table``."""
    if isinstance(node, LogicalExpr):
        terms = [filter_q(term, table) for term in node.terms]
        combined = terms[0]
        for term in terms[1:]:
            combined = combined & term if node.op == LogicalOperator.and_ else combined | term
        return combined
    if isinstance(node, Not):
        return ~filter_q(node.expr, table)
    if isinstance(node, Present | Comparison):
        path = node.attr_path
        key = f"{path.attr}.{path.sub_attr}" if path.sub_attr else path.attr
        if key.lower() not in table:
            raise InvalidFilterException(detail=f"filtering on {key!r} is not supported")
        lookup, kind = table[key.lower()]
        if isinstance(node, Present):
            return (
                Q(**{f"{lookup}__isnull": False}) & ~Q(**{lookup: ""})
                if kind != "id"
                else Q(**{f"{lookup}__isnull": False})
            )
        return _comparison(lookup, kind, node.op, node.value)
    raise InvalidFilterException(detail=f"this filter is not supported: {node}")


def _comparison(lookup: str, kind: str, op: CompareOperator, value: Any) -> Q:
    if op == CompareOperator.ne:
        return ~_comparison(lookup, kind, CompareOperator.eq, value)
    if kind == "id":
        if op != CompareOperator.eq:
            raise InvalidFilterException(detail="an id compares with eq or ne only")
        try:
            return Q(**{lookup: int(str(value))})
        except ValueError:
            return Q(pk__in=[])  # no resource has such an id
    if kind == "bool":
        if op != CompareOperator.eq or not isinstance(value, bool):
            raise InvalidFilterException(detail="active compares with eq true/false")
        return Q(**{lookup: value})
    if value is None:
        return Q(**{f"{lookup}__isnull": True})
    if op in _ORDER:
        return Q(**{f"{lookup}__{_ORDER[op]}": str(value)})
    table = _TEXT if kind == "text" else _EXACT
    return Q(**{f"{lookup}__{table[op]}": str(value)})


def _version(stamp: Any) -> str:
    return f'W/"{int(stamp.timestamp() * 1_000_000)}"'


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except Conflict as exc:
        raise UniquenessException(detail=str(exc.message)) from exc
    except ValidationFailed as exc:
        raise InvalidValueException(detail=str(exc.message)) from exc
    except NotFound as exc:
        raise NotFoundException(detail=str(exc.message)) from exc
    except IntegrityError as exc:  # a concurrent request took the name or externalId first
        raise UniquenessException(detail="a unique value is taken") from exc


def _stored_attributes(resource: Resource[Any]) -> dict[str, Any]:
    """A user's attributes kept as sent: the resource as SCIM returns it (no password), less what
    has a column or is the platform's to say (its groups). ``active`` is kept as a marker: a
    provider that removed it (unassigned) sees none, and the account stays as it was."""
    dumped = resource.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    for name in ("id", "meta", "groups", "userName", "externalId"):
        dumped.pop(name, None)
    return dumped


class DatabaseStorage(ScimStorage):
    """The SCIM resources of the platform (one request's worth: ``actor`` is its token's label)."""

    def __init__(self, *, actor: Actor, models: dict[str, type[Resource[Any]]]):
        self.actor = actor
        self.models = models

    @contextlib.contextmanager
    def operation(self) -> Iterator[None]:
        # One transaction per operation: a PATCH reads and writes the resource in the same one.
        with transaction.atomic(), _translated():
            yield

    # ------------------------------------------------------------ reading

    def _users(self) -> QuerySet[User]:
        return User.objects.filter(scim__isnull=False, scim__deleted_at__isnull=True).select_related("scim")

    def _groups(self) -> QuerySet[Group]:
        return Group.objects.filter(scim__isnull=False).select_related("scim")

    def _user(self, resource_id: str) -> User:
        try:
            return self._users().get(pk=int(resource_id))
        except (ValueError, User.DoesNotExist):
            raise NotFoundException(detail=f"User {resource_id!r} not found") from None

    def _group(self, resource_id: str) -> Group:
        try:
            return self._groups().get(pk=int(resource_id))
        except (ValueError, Group.DoesNotExist):
            raise NotFoundException(detail=f"Group {resource_id!r} not found") from None

    def user_resource(self, user: User) -> Resource[Any]:
        scim: ScimUser = user.scim
        groups = [
            {"value": str(gid), "display": name, "$ref": f"Groups/{gid}", "type": "direct"}
            for gid, name in user.groups.filter(scim__isnull=False).order_by("pk").values_list("pk", "name")
        ]
        payload = {
            **(scim.attributes or {}),
            "id": str(user.pk),
            "userName": user.username,
            # the platform's state wins (an administrator may have switched the account off)
            "active": user.is_active if "active" in (scim.attributes or {}) else None,
            "externalId": scim.external_id,
            "groups": groups or None,
        }
        payload.setdefault("schemas", ["urn:ietf:params:scim:schemas:core:2.0:User"])
        resource = self.models["User"].model_validate({k: v for k, v in payload.items() if v is not None})
        resource.meta = Meta(
            resource_type="User",
            created=scim.created_at,
            last_modified=scim.updated_at,
            version=_version(scim.updated_at),
        )
        return resource

    def group_resource(self, group: Group) -> Resource[Any]:
        scim: ScimGroup = group.scim
        members = [
            {"value": str(uid), "display": username, "$ref": f"Users/{uid}", "type": "User"}
            for uid, username in group.user_set.filter(scim__isnull=False, scim__deleted_at__isnull=True)
            .order_by("pk")
            .values_list("pk", "username")
        ]
        payload = {
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
            "id": str(group.pk),
            "displayName": group.name,
            "externalId": scim.external_id,
            "members": members or None,
        }
        resource = self.models["Group"].model_validate({k: v for k, v in payload.items() if v is not None})
        resource.meta = Meta(
            resource_type="Group",
            created=scim.created_at,
            last_modified=scim.updated_at,
            version=_version(scim.updated_at),
        )
        return resource

    def get(
        self,
        resource_type: ResourceType,
        resource_id: str,
        *,
        response_parameters: ResponseParameters[Any] | None = None,
    ) -> Resource[Any]:
        if resource_type.name == "User":
            return self.user_resource(self._user(resource_id))
        return self.group_resource(self._group(resource_id))

    def search(
        self, resource_types: list[ResourceType], search_request: SearchRequest[Any], *, position: Any = None
    ) -> SearchPage:
        if len(resource_types) != 1:
            raise NotImplementedException(detail="search each resource type at its own endpoint")
        is_user = resource_types[0].name == "User"
        queryset: QuerySet[Any] = self._users() if is_user else self._groups()
        if search_request.filter is not None:
            queryset = queryset.filter(filter_q(search_request.filter.ast, USER_FILTERS if is_user else GROUP_FILTERS))
            queryset = queryset.distinct()
        queryset = queryset.order_by("pk")
        total = queryset.count()
        start = search_request.start_index_0 or 0
        count = search_request.count
        rows = list(queryset[start : start + count]) if count is not None else list(queryset[start:])
        build = self.user_resource if is_user else self.group_resource
        return SearchPage(total, [build(row) for row in rows])

    # ------------------------------------------------------------ writing

    @staticmethod
    def _user_fields(resource: Resource[Any]) -> services.UserFields:
        emails = resource.emails or []
        primary = next((e for e in emails if e.primary), emails[0] if emails else None)
        name = resource.name
        username = (resource.user_name or "").strip()
        if not username or len(username) > 150:
            raise InvalidValueException(detail="userName is required, at most 150 characters")
        return services.UserFields(
            username=username,
            active=resource.active,
            external_id=resource.external_id or None,
            first_name=(name.given_name if name and name.given_name else "") or "",
            last_name=(name.family_name if name and name.family_name else "") or "",
            email=str(primary.value) if primary is not None and primary.value else "",
            attributes=_stored_attributes(resource),
        )

    @staticmethod
    def _member_ids(resource: Resource[Any]) -> list[str]:
        return [str(member.value) for member in (resource.members or []) if member.value is not None]

    @staticmethod
    def _group_name(resource: Resource[Any]) -> str:
        name = (resource.display_name or "").strip()
        if not name or len(name) > 150:
            raise InvalidValueException(detail="displayName is required, at most 150 characters")
        return name

    def create(self, resource_type: ResourceType, resource: Resource[Any]) -> Resource[Any]:
        with self.operation():
            if resource_type.name == "User":
                user = services.scim_user_create(fields=self._user_fields(resource), actor=self.actor)
                return self.user_resource(self._users().get(pk=user.pk))
            group = services.scim_group_create(
                name=self._group_name(resource),
                external_id=resource.external_id or None,
                member_ids=self._member_ids(resource),
                actor=self.actor,
            )
            return self.group_resource(self._groups().get(pk=group.pk))

    def update(
        self, resource_type: ResourceType, resource: Resource[Any], *, expected_version: str | None = None
    ) -> Resource[Any]:
        with self.operation():
            if resource_type.name == "User":
                user = self._user(str(resource.id))
                services.scim_user_update(user=user, fields=self._user_fields(resource), actor=self.actor)
                return self.user_resource(self._users().get(pk=user.pk))
            group = self._group(str(resource.id))
            services.scim_group_update(
                group=group,
                name=self._group_name(resource),
                external_id=resource.external_id or None,
                member_ids=self._member_ids(resource),
                actor=self.actor,
            )
            return self.group_resource(self._groups().get(pk=group.pk))

    def delete(self, resource_type: ResourceType, resource_id: str, *, expected_version: str | None = None) -> None:
        with self.operation():
            if resource_type.name == "User":
                services.scim_user_delete(user=self._user(resource_id), actor=self.actor)
            else:
                services.scim_group_delete(group=self._group(resource_id), actor=self.actor)
