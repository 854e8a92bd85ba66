"""The hub page (/hub/) for people with the hub permission: the demo mirror's issues with filters and
an issue's card, a batch created through the hub's service with its state — updated without a reload
when the sync agent reports — and a 375 px layout with nothing wider than the screen."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from hub import protocol, services
from hub.models import IssueNote
from hub.permissions import hub_group_ensure
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.p1]

WIDER = (
    "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1)"
    ".slice(0, 5).map(e => e.tagName + '.' + e.className)"
)


def _hub_user(user_factory, username: str):
    user = user_factory(username=username)
    user.groups.add(hub_group_ensure())
    return user


def test_the_hub_page_lists_the_mirror_and_follows_a_batch_to_done(live_url, page, user_factory):
    # given: the demo mirror (project AURORA), a hub user and their batch
    call_command("demo_hub", stdout=io.StringIO())
    user = _hub_user(user_factory, "browser-hub")
    created = services.batch_create(
        user=user,
        title="Комментарий к задаче",
        commands=[{"type": "ensure_comment", "key": "AURORA-9001", "body": "Проверено на стенде."}],
    )
    sign_in(page, live_url, user.username)
    # when: the page opens
    page.goto(live_url + "/hub/")
    # then: the mirror's issues, filterable by text, with a card
    expect(page.locator("#issues li.issue").first).to_be_visible()
    assert page.locator("#issues li.issue").count() == 25 and page.is_visible("#issues-more")
    page.fill("#filters input[name=text]", "AURORA-9001")
    page.click("#filters button[type=submit]")
    expect(page.locator("#issues li.issue")).to_have_count(1)
    page.click("#issues li.issue button.link")
    expect(page.locator("#card-h")).to_contain_text("AURORA-9001")
    expect(page.locator("#card-body")).to_contain_text("Комментарии")
    # the hub's notes on it, saved through the notes route
    page.fill("#card-body form.notes input[name=next_step]", "Проверить на стенде")
    page.click("#card-body form.notes button[type=submit]")
    expect(page.locator("#card-body form.notes [role=status]")).to_have_text("Сохранено.")
    assert IssueNote.objects.get(issue__key="AURORA-9001").next_step == "Проверить на стенде"
    # the batch, listed and opened: queued
    row = page.locator(f"#batches li.batch[data-id='{created.id}']")
    expect(row).to_contain_text("Комментарий к задаче")
    row.locator("button.link").click()
    expect(page.locator("#batch-summary")).to_contain_text("в очереди")
    expect(page.locator("#batch-commands li.command")).to_have_count(created.command_count)
    # when: the sync agent takes the commands (the comment, then the refresh after it) and reports them done
    agent, _ = protocol.sync_agent_create(name="onprem-browser")
    for _ in range(created.command_count):
        claimed = protocol.sync_agent_claim(sync_agent=agent, version=6, launcher_version=None)
        protocol.sync_agent_report(
            sync_agent=agent,
            results=[
                {"command_id": c["id"], "lease_token": c["lease_token"], "status": "done", "result": {}}
                for c in claimed["commands"]
            ],
            rate_limited=[],
        )
    # then: the open batch shows it without a reload (the wait route wakes on the batch's event)
    expect(page.locator("#batch-summary")).to_contain_text("выполнен", timeout=10_000)
    expect(page.locator("#batch-commands li.command .badge")).to_have_text(["выполнена"] * created.command_count)
    expect(page.locator("#agent-lines")).not_to_contain_text("Загрузка")
    page.click("#sync-log-box summary")
    expect(page.locator("#sync-log")).to_contain_text("Синхронизаций ещё не было.")


def test_the_hub_page_at_375px_fits_the_screen(live_url, page, user_factory):
    call_command("demo_hub", stdout=io.StringIO())
    user = _hub_user(user_factory, "browser-hub-narrow")
    services.batch_create(user=user, title="Обновить всё " * 6, commands=[{"type": "refresh", "full": True}])
    page.set_viewport_size({"width": 375, "height": 812})
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/hub/?issue=AURORA-9001")
    expect(page.locator("#card-h")).to_contain_text("AURORA-9001")
    expect(page.locator("#batches li.batch")).to_have_count(1)
    page.locator("#batches li.batch button.link").click()
    expect(page.locator("#batch-commands li.command")).to_have_count(1)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375, page.evaluate(WIDER)
    assert page.evaluate(WIDER) == []


def test_without_the_hub_permission_the_page_is_refused(live_url, page, user_factory):
    user = user_factory(username="browser-no-hub")
    sign_in(page, live_url, user.username)
    response = page.goto(live_url + "/hub/")
    assert response.status == 403
    page.goto(live_url + "/")
    assert page.locator("header nav a[href='/hub/']").count() == 0
