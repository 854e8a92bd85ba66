"""The agents API (AE-API): parse → service/selector → schema. Mounted in ``achilles/api.py``."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext as _
from ninja import Query, Router, Schema, Status

from achilles.errors import NotFound, PermissionDenied, ValidationFailed
from achilles.pagination import ListParams, Page
from achilles.selectors import allowed_model_by_id, allowed_model_check
from agents import schedule as sched
from agents import selectors, services
from agents.models import Agent
from agents.schemas import (
    AgentAdminOut,
    AgentIn,
    AgentOut,
    AgentPatch,
    RunCreatedOut,
    RunOut,
    SubscriptionIn,
    SubscriptionOut,
)
from agents.services import events as event_services
from conversations.rendering import markdown_render
from knowledge import facade
from knowledge.facade import Identity

router = Router(tags=["agents"])


def _out(agent: Agent, active: dict[int, str], *, admin: bool = False, budget: dict[int, bool] | None = None) -> dict:
    """``budget``: owner id → over budget, computed once for a list page (``owners_over_budget``)."""
    tz = agent.owner.effective_timezone()
    budget = budget if budget is not None else {}
    if agent.owner_id not in budget:
        budget[agent.owner_id] = selectors.owner_over_budget(owner=agent.owner, now=timezone.now())
    blocker = selectors.agent_run_blocker(
        agent=agent, active_state=active.get(agent.pk), over_budget=budget[agent.owner_id]
    )
    data = {
        "id": agent.pk,
        "name": agent.name,
        "instructions": agent.instructions,
        "model": agent.model.name if agent.model_id else None,
        "model_id": agent.model_id,
        "schedule": agent.schedule,
        "enabled": agent.enabled,
        "admin_paused": agent.admin_paused,
        "status": agent.status(active.get(agent.pk)),
        "next_run_at": agent.next_run_at,
        "next_runs": sched.preview(agent.schedule, tz, now=timezone.now(), first=agent.next_run_at)
        if agent.next_run_at
        else [],
        "timezone": tz,
        "created_at": agent.created_at,
        "updated_at": agent.updated_at,
        "can_run": blocker is None,
        "cannot_run_reason": blocker,
    }
    if admin:
        data.update(owner=agent.owner.username, owner_id=agent.owner_id, owner_active=agent.owner.is_active)
    return data


def _model_name(name: str | None, model_id: int | None) -> str | None:
    """The model the payload names, by name, by allow-list id (the seed's ``model_id``) or both."""
    if model_id is None:
        return name
    row = allowed_model_check(f"#{model_id}", allowed_model_by_id(model_id=model_id), kind="chat", field="model_id")
    if name is not None and name != row.name:
        raise ValidationFailed(
            f"model {name!r} and model_id {model_id} name different models", code="model_mismatch", field="model_id"
        )
    return row.name


def _fresh(agent: Agent) -> Agent:
    try:
        agent.refresh_from_db()
    except Agent.DoesNotExist:  # deleted by a concurrent request right after this one's write
        raise NotFound(_("Агент не найден."), code="agent_not_found") from None
    return agent


def _refuse_admin_paused(payload: Schema) -> None:
    if "admin_paused" in payload.model_fields_set:
        raise PermissionDenied(
            _("Остановить агента администратором может только администратор платформы."), code="admin_only"
        )


def _require_staff(request: HttpRequest) -> None:
    if not request.auth.is_staff:
        raise PermissionDenied(_("Только для администраторов платформы."), code="admin_only")


@router.get("/agents", response=Page[AgentOut])
def agents_list(request: HttpRequest, params: Query[ListParams]):
    page = selectors.agent_page_for_owner(user=request.auth, cursor=params.cursor, limit=params.limit)
    active = selectors.active_run_states([a.pk for a in page.items])
    budget = selectors.owners_over_budget(owners=[a.owner for a in page.items], now=timezone.now())
    return page.map(lambda a: _out(a, active, budget=budget))


@router.post("/agents", response={201: AgentOut})
def agents_create(request: HttpRequest, payload: AgentIn):
    _refuse_admin_paused(payload)
    agent = services.agent_create(
        owner=request.auth,
        name=payload.name,
        instructions=payload.instructions,
        model_name=_model_name(payload.model, payload.model_id),
        schedule=payload.schedule.model_dump() if payload.schedule else None,
        enabled=payload.enabled,
    )
    return Status(201, _out(_fresh(agent), {}))


@router.get("/agents/{int:agent_id}", response=AgentOut)
def agents_get(request: HttpRequest, agent_id: int):
    agent = selectors.agent_get_for_owner(agent_id=agent_id, user=request.auth)
    return _out(agent, selectors.active_run_states([agent.pk]))


@router.patch("/agents/{int:agent_id}", response=AgentOut)
def agents_update(request: HttpRequest, agent_id: int, payload: AgentPatch):
    agent = selectors.agent_get_for_owner(agent_id=agent_id, user=request.auth)
    changes = {}
    fields = set(payload.model_fields_set)
    if "model_id" in fields:
        fields.discard("model_id")
        if payload.model_id is not None:
            fields.discard("model")
            changes["model"] = _model_name(
                payload.model if "model" in payload.model_fields_set else None, payload.model_id
            )
    for field in fields:
        value = getattr(payload, field)
        if field == "schedule":
            changes[field] = value.model_dump() if value is not None else None
        elif value is None and field in ("name", "instructions", "enabled"):
            continue  # explicit null on a non-nullable field: nothing to change
        else:
            changes[field] = value
    agent = services.agent_update(agent=agent, changes=changes)
    return _out(_fresh(agent), selectors.active_run_states([agent.pk]))


@router.delete("/agents/{int:agent_id}", response={204: None})
def agents_delete(request: HttpRequest, agent_id: int):
    agent = selectors.agent_get_for_owner(agent_id=agent_id, user=request.auth)
    services.agent_delete(agent=agent)
    return Status(204, None)


@router.post("/agents/{int:agent_id}/run", response={202: RunCreatedOut})
def agents_run(request: HttpRequest, agent_id: int):
    agent = selectors.agent_get_for_owner(agent_id=agent_id, user=request.auth)
    run = services.agent_run_request(agent=agent)
    return Status(202, {"run_id": run.pk, "agent_id": agent.pk, "state": run.state, "trigger": run.trigger})


@router.get("/agents/{int:agent_id}/runs", response=Page[RunOut])
def agents_runs(request: HttpRequest, agent_id: int, params: Query[ListParams]):
    """The agent's runs, newest first."""
    agent = selectors.agent_get_for_owner(agent_id=agent_id, user=request.auth)
    page = selectors.agent_runs_page(agent=agent, cursor=params.cursor, limit=params.limit)
    _runs_with_sources(page.items, request.auth)
    return page


def _runs_with_sources(runs, reader) -> None:
    """Each run's output rendered like a chat answer, its cited sources checked against the
    reader's access now (one query for the page): a record closed to them since keeps its place only."""
    cited = sorted({s["record_id"] for r in runs for s in r.sources or [] if isinstance(s.get("record_id"), int)})
    visible = facade.visible_records(cited, Identity.for_user(reader)) if cited else frozenset()
    systems = sorted({str(s.get("source_system", "")) for r in runs for s in r.sources or []})
    labels = facade.source_labels(systems) if systems else {}
    for run in runs:
        checked = []
        for source in run.sources or []:
            available = source.get("record_id") in visible
            checked.append(
                {
                    "marker": source["marker"],
                    "record_id": source.get("record_id") if available else None,
                    "title": source.get("title", "") if available else "",
                    "url": source.get("url", "") if available else "",
                    "source_system": source.get("source_system", "") if available else "",
                    "source_label": labels.get(source.get("source_system", ""), "") if available else "",
                    "chunk_text": source.get("chunk_text", "") if available else "",
                    "available": available,
                }
            )
        run.sources_checked = checked
        run.output_html = (
            markdown_render(run.output, message_id=f"run{run.pk}", markers={s["marker"] for s in checked})
            if run.output
            else ""
        )


@router.get("/agents/{int:agent_id}/subscriptions", response=list[SubscriptionOut])
def agents_subscriptions(request: HttpRequest, agent_id: int):
    """The hub events that wake the agent (runs with ``trigger=event``)."""
    agent = selectors.agent_get_for_owner(agent_id=agent_id, user=request.auth)
    return list(agent.subscriptions.order_by("id"))


@router.post("/agents/{int:agent_id}/subscriptions", response={201: SubscriptionOut})
def agents_subscribe(request: HttpRequest, agent_id: int, payload: SubscriptionIn):
    agent = selectors.agent_get_for_owner(agent_id=agent_id, user=request.auth)
    return Status(201, event_services.agent_subscription_create(agent=agent, **payload.model_dump()))


@router.delete("/agents/{int:agent_id}/subscriptions/{int:subscription_id}", response={204: None})
def agents_unsubscribe(request: HttpRequest, agent_id: int, subscription_id: int):
    agent = selectors.agent_get_for_owner(agent_id=agent_id, user=request.auth)
    event_services.agent_subscription_delete(agent=agent, subscription_id=subscription_id)
    return Status(204, None)


# ------------------------------------------------------------------ admin registry


class AdminAgentsQuery(ListParams):
    owner: str | None = None
    enabled: bool | None = None
    admin_paused: bool | None = None


@router.get("/admin/agents", response=Page[AgentAdminOut], tags=["admin"])
def admin_agents_list(request: HttpRequest, query: Query[AdminAgentsQuery]):
    _require_staff(request)
    page = selectors.agent_page_for_admin(
        owner=query.owner,
        enabled=query.enabled,
        admin_paused=query.admin_paused,
        cursor=query.cursor,
        limit=query.limit,
    )
    active = selectors.active_run_states([a.pk for a in page.items])
    budget = selectors.owners_over_budget(owners=[a.owner for a in page.items], now=timezone.now())
    return page.map(lambda a: _out(a, active, admin=True, budget=budget))


@router.post("/admin/agents/{int:agent_id}/pause", response=AgentAdminOut, tags=["admin"])
def admin_agents_pause(request: HttpRequest, agent_id: int):
    _require_staff(request)
    agent = services.agent_set_admin_paused(agent_id=agent_id, paused=True, actor=request.auth)
    return _out(_fresh(agent), selectors.active_run_states([agent.pk]), admin=True)


@router.post("/admin/agents/{int:agent_id}/resume", response=AgentAdminOut, tags=["admin"])
def admin_agents_resume(request: HttpRequest, agent_id: int):
    _require_staff(request)
    agent = services.agent_set_admin_paused(agent_id=agent_id, paused=False, actor=request.auth)
    return _out(_fresh(agent), selectors.active_run_states([agent.pk]), admin=True)
