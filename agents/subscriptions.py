"""What the Agent Engine does when the core announces a change (``achilles.hooks``; subscribed in
``AgentsConfig.ready``). The deactivation cascade itself is a database trigger (migration 0002)."""

from __future__ import annotations

from achilles import hooks
from agents.services import agents_reschedule_calendar, agents_reschedule_for_org_timezone
from agents.services.events import on_jira_issues_changed


def reschedule_owner_calendar(event: hooks.UserTimezoneChanged) -> None:
    """A changed owner time zone moves that owner's calendar slots."""
    agents_reschedule_calendar(owner=event.user)


def reschedule_for_org_timezone(event: hooks.OrgTimezoneChanged) -> None:
    """A changed organisation time zone moves the slots of every owner without a zone of their own."""
    agents_reschedule_for_org_timezone(timezone_name=event.new)


def subscribe() -> None:
    hooks.user_timezone_changed.subscribe(reschedule_owner_calendar)
    hooks.org_timezone_changed.subscribe(reschedule_for_org_timezone)
    # Jira changes in the hub's mirror wake the agents subscribed to them (agents.services.events).
    hooks.jira_issues_changed.subscribe(on_jira_issues_changed)
