"""Agents woken by Jira events, end to end: a change made in the Jira emulator travels through the
real sync agent and the hub's mirror (daphne) to the agent subscribed to it; the scheduler tick's
event step then starts the run (called here directly, with the clock past the debounce)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.syncagent.harness import start_launcher, stop, wait_until

pytestmark = [pytest.mark.p1]


def _transition(platform, key: str, to: str) -> None:
    jira = platform.emulator.jira
    options = jira.get(f"/rest/api/2/issue/{key}/transitions").json()["transitions"]
    [tid] = [t["id"] for t in options if t["to"]["name"] == to]
    jira.post(f"/rest/api/2/issue/{key}/transitions", json={"transition": {"id": tid}}).raise_for_status()


def test_an_agent_subscribed_to_a_status_runs_once_when_an_issue_moves_there(platform):
    from django.core.management import call_command
    from django.utils import timezone

    from agents.models import Agent, AgentEvent, AgentRun
    from agents.services.events import agent_events_fire, agent_subscription_create
    from hub.models import MirrorIssue, SyncRun
    from tests.achilles.factories import AllowedModelFactory

    call_command("demo_hub")
    model = AllowedModelFactory(name="fake-events")
    # given «AURORA, status → In Progress» for one agent, and «AURORA, any edit» for another
    watcher = Agent.objects.create(owner=platform.person, name="watcher", model=model)
    agent_subscription_create(
        agent=watcher, events=["transitioned"], project="AURORA", status="In Progress", debounce_seconds=2
    )
    editor = Agent.objects.create(owner=platform.person, name="editor", model=model)
    agent_subscription_create(agent=editor, events=["updated"], project="AURORA", debounce_seconds=30)
    to_do = [i["key"] for i in platform.emulator.search("project = AURORA AND status = 'To Do' ORDER BY key")]
    moved, elsewhere, edited = to_do[:3]

    proc = start_launcher(
        hub_url=platform.hub_url,
        token=platform.sync_token,
        jira_url=platform.emulator.url,
        state_dir=platform.tmp / "syncagent",
        log=platform.tmp / "launcher.log",
    )
    try:
        wait_until(lambda: SyncRun.objects.filter(kind="full", status="ok").exists(), 60, "the first full sync")
        assert not AgentEvent.objects.exists(), "the first sync changed nothing: no news"

        # when one issue moves to In Progress and another to Done, in Jira
        _transition(platform, moved, "In Progress")
        _transition(platform, elsewhere, "Done")
        wait_until(
            lambda: MirrorIssue.objects.filter(key=moved, status="In Progress").exists()
            and MirrorIssue.objects.filter(key=elsewhere, status="Done").exists(),
            20,
            "both moves in the mirror",
        )
        # then the watcher runs once, for the issue that moved there
        assert agent_events_fire(now=timezone.now()) == [], "still within the debounce"
        [run_id] = agent_events_fire(now=timezone.now() + timedelta(seconds=3))
        run = AgentRun.objects.get(pk=run_id)
        assert (run.agent_id, run.trigger) == (watcher.pk, "event")
        assert [(e.issue_key, e.kinds, e.changes["status"]) for e in run.events.all()] == [
            (moved, ["transitioned"], ["To Do", "In Progress"])
        ]

        # when the same issue is edited five times in a burst (each edit reaching the mirror)
        for n in range(1, 6):
            platform.emulator.admin.post("/_emulator/touch", json={"key": edited, "summary": f"Правка {n}"})
            wait_until(
                lambda n=n: MirrorIssue.objects.filter(key=edited, summary=f"Правка {n}").exists(),
                20,
                f"edit {n} in the mirror",
            )
        # then the editor runs once, carrying all five
        [burst_run] = agent_events_fire(now=timezone.now() + timedelta(seconds=31))
        assert AgentRun.objects.get(pk=burst_run).agent_id == editor.pk
        [event] = AgentEvent.objects.filter(run_id=burst_run)
        assert (event.issue_key, event.hits, event.changes["summary"][1]) == (edited, 5, "Правка 5")
        assert AgentRun.objects.filter(agent=watcher).count() == 1
        assert AgentRun.objects.filter(agent=editor).count() == 1
    finally:
        stop(proc)
