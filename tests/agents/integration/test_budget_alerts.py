"""Budget alerts: an owner's agents reaching 80 % and 100 % of the weekly budget leave an audit
event and a log line, once per owner, week and threshold."""

from __future__ import annotations

import logging

import pytest

from achilles.llm import TextDelta, Usage
from achilles.models import AuditEvent
from achilles.platform import platform_settings_update
from agents.services import agent_run_request
from agents.services.alerts import BUDGET_ALERT_ACTION, owner_budget_alerts_check
from agents.services.runs import run_execute

pytestmark = [pytest.mark.integration, pytest.mark.p1, pytest.mark.django_db]


def _run(agent, fake_chat, inputs: int, outputs: int):
    fake_chat.add_round([TextDelta("Готово."), Usage(inputs, outputs)])
    run = agent_run_request(agent=agent)
    assert run_execute(run.pk) == "succeeded"
    return run


def test_80_and_100_percent_alerts_once_each(owner, agent_factory, fake_chat, fake_ks, caplog):
    platform_settings_update(weekly_token_budget=100_000, agent_run_token_cap=60_000)
    agent = agent_factory(owner=owner)
    caplog.set_level(logging.WARNING, logger="agents.services.alerts")
    # 50 % spent: no alert
    first = _run(agent, fake_chat, 30_000, 20_000)
    assert not AuditEvent.objects.filter(action=BUDGET_ALERT_ACTION).exists()
    # 85 %: the 80 % alert
    _run(agent, fake_chat, 20_000, 15_000)
    events = list(AuditEvent.objects.filter(action=BUDGET_ALERT_ACTION).values_list("target", "details"))
    assert len(events) == 1
    target, details = events[0]
    assert target.startswith(f"user:{owner.pk} week:") and target.endswith(" 80%")
    assert details["spent"] == 85_000 and details["budget"] == 100_000 and details["percent"] == 80
    assert "agents budget threshold owner=owner percent=80 spent=85000 budget=100000" in caplog.text
    # checked again (another run of the same week): nothing repeated
    assert owner_budget_alerts_check(run_id=first.pk) == []
    # 100 %: the 100 % alert, the 80 % one not repeated
    platform_settings_update(weekly_token_budget=85_000)
    assert owner_budget_alerts_check(run_id=first.pk) == [100]
    assert sorted(
        t[-4:] for t in AuditEvent.objects.filter(action=BUDGET_ALERT_ACTION).values_list("target", flat=True)
    ) == [
        " 80%",
        "100%",
    ]
    assert AuditEvent.objects.filter(action=BUDGET_ALERT_ACTION).count() == 2


def test_the_split_and_the_model_of_a_run_are_stored(owner, agent_factory, fake_chat, fake_ks):
    agent = agent_factory(owner=owner)
    run = _run(agent, fake_chat, 700, 300)
    run.refresh_from_db()
    assert (run.tokens_used, run.input_tokens, run.output_tokens, run.model) == (1000, 700, 300, agent.model.name)
