"""Fixtures of the hub's tests: users with and without the hub permission, sync agents, a mirror."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.achilles.factories import UserFactory


@pytest.fixture
def hub_user(db):
    from hub.permissions import hub_group_ensure

    user = UserFactory(username="hubby")
    user.groups.add(hub_group_ensure())
    return user


@pytest.fixture
def hub_staff(db):
    from hub.permissions import hub_group_ensure

    user = UserFactory(username="hubadmin", is_staff=True)
    user.groups.add(hub_group_ensure())
    return user


@pytest.fixture
def outsider(db):
    return UserFactory(username="outsider")


@pytest.fixture
def sync_agent(db):
    from hub.protocol import sync_agent_create

    agent, raw = sync_agent_create(name="onprem-1")
    agent.raw_token = raw
    return agent


@pytest.fixture
def sync_headers(sync_agent):
    return {"HTTP_AUTHORIZATION": f"Bearer {sync_agent.raw_token}"}


def issue_payload(key: str, *, updated: str = "2026-11-30T11:50:00.000+0000", **extra) -> dict:
    project = key.split("-")[0]
    data = {
        "key": key,
        "project": project,
        "summary": f"Задача {key}",
        "status": "To Do",
        "issue_type": "Task",
        "priority": "Medium",
        "assignee": "jdoe",
        "duedate": "2026-12-01",
        "sprint": "Спринт 1",
        "labels": ["AWPCA"],
        "updated": updated,
        "fields": {"description": f"Описание {key}"},
        "links": [],
        "comments": [],
    }
    data.update(extra)
    return data


@pytest.fixture
def mirror(db):
    """``mirror(*issue_payloads)`` → upload them as the sync agent would (parsed like the REST body)."""
    from hub.protocol import mirror_upload
    from hub.schemas import UploadIn

    def upload(*issues: dict) -> dict:
        page = UploadIn.model_validate({"issues": list(issues)})
        return mirror_upload(sync_agent=None, sync_run_id=None, issues=[i.model_dump() for i in page.issues])

    return upload


def aware(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


# The probe's planting attack (security round two, finding 1): words of a finance-only report, guessed
# words absent from it, and the report itself, curated (written by an admin).
PLANTING_PRESENT = ["Здоровье", "Крупнейшая", "стратегической", "кандидатов"]
PLANTING_ABSENT = ["Зебра", "Орион", "Кварцит", "Пегас"]


def finance_report_write(*, author_principal_id: str | None = None) -> int:
    """The quarter's results, readable by group finance only; returns the record id."""
    from knowledge.services import record_upsert

    return record_upsert(
        source_system="files",
        external_id="finance/q3-2026.md",
        title="Итоги третьего квартала 2026",
        text="Крупнейшая сделка квартала — 21 млн ₽ с сетью клиник «Здоровье+». "
        "Из стратегической линейки кандидатов на продление двое.",
        acl=["group:finance"],
        author_principal_id=author_principal_id,
        origin="api",
        user_writable=False,
    ).record_id
