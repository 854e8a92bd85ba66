"""An agent run's output rendered like a chat answer with its sources (issue 26): the [N] markers
linked to cards, each source checked against the reader's access when the runs are read."""

from __future__ import annotations

import pytest
from django.utils import timezone

from agents.models import AgentRun
from knowledge.services import record_upsert
from tests.agents.conftest import AgentFactory

pytestmark = [pytest.mark.api, pytest.mark.django_db]


def test_a_runs_output_comes_rendered_with_its_sources_and_a_closed_one_is_unavailable(owner, asgi_client):
    # given: a run whose output cites an open record [1] and one the owner may no longer read [2]
    open_ = record_upsert(
        source_system="files",
        external_id="o",
        title="Политика отпусков",
        text="28 дней.",
        acl=["everyone"],
        url="https://wiki.example.com/vacation",
    ).record_id
    closed = record_upsert(
        source_system="hr",
        external_id="c",
        title="Оклады",
        text="424242.",
        acl=["group:hr"],
        url="https://hr.example.com/s",
    ).record_id
    agent = AgentFactory(owner=owner)
    now = timezone.now()
    run = AgentRun.objects.create(
        agent=agent,
        trigger="manual",
        state="succeeded",
        output="Отпуск — **28 дней** [1]. Оклад [2].",
        sources=[
            {
                "marker": 1,
                "record_id": open_,
                "title": "Политика отпусков",
                "url": "https://wiki.example.com/vacation",
                "source_system": "files",
                "chunk_text": "28 дней.",
            },
            {
                "marker": 2,
                "record_id": closed,
                "title": "Оклады",
                "url": "https://hr.example.com/s",
                "source_system": "hr",
                "chunk_text": "424242.",
            },
        ],
        started_at=now,
        finished_at=now,
    )

    # when
    [out] = asgi_client(owner).get(f"/api/agents/{agent.pk}/runs").json()["items"]

    # then
    assert out["id"] == run.pk
    assert "<strong>28 дней</strong>" in out["output_html"]
    assert f'href="#src-run{run.pk}-1"' in out["output_html"]
    assert [(s["marker"], s["available"], s["title"]) for s in out["sources"]] == [
        (1, True, "Политика отпусков"),
        (2, False, ""),
    ]
    assert out["sources"][1]["chunk_text"] == "" and out["sources"][1]["url"] == ""
    # the source by the label people know it by; nothing of the closed one
    assert [(s["source_system"], s["source_label"]) for s in out["sources"]] == [("files", "Файлы"), ("", "")]
    assert "424242" not in str(out["sources"])
