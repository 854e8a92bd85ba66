"""The hub page (/hub/) for people with the hub permission, end to end with the real sync agent and the
Jira emulator: the mirror's issues with filters and an issue's card, a comment sent to Jira from the
card as a batch that lands in the emulator and shows done without a reload; and a 375 px layout with
nothing wider than the screen."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from hub import services
from hub.models import IssueNote
from hub.permissions import hub_group_ensure
from tests.browser.conftest import sign_in
from tests.browser.pagecheck import layout_problems

pytestmark = [pytest.mark.browser, pytest.mark.p1]


def _hub_user(user_factory, username: str):
    user = user_factory(username=username)
    user.groups.add(hub_group_ensure())
    return user


@pytest.fixture
def sync_agent(live_url, tmp_path):
    """The real thing beside the page's daphne: the Jira emulator process (its demo project AURORA) and
    the sync agent (``python -m syncagent``) polling the hub every second."""
    from hub.models import HubState
    from hub.notify import hub_boot_mark
    from hub.protocol import sync_agent_create
    from hub.services import settings_set
    from tests.syncagent.harness import Emulator, start_agent, stop

    HubState.objects.get_or_create(pk=1)  # a migration's row; an earlier transactional test's flush emptied it
    staff = _hub_user_staff()
    settings_set(user=staff, key="poll_interval_seconds", value=1)
    settings_set(user=staff, key="lease_seconds", value=10)
    _agent, token = sync_agent_create(name="onprem-browser")
    hub_boot_mark()
    emulator = Emulator(tmp_path / "emulator.log")
    agent = start_agent(
        hub_url=live_url,
        token=token,
        jira_url=emulator.url,
        state_dir=tmp_path / "syncagent",
        log=tmp_path / "agent.log",
    )
    try:
        yield emulator
    finally:
        stop(agent)
        emulator.stop()


def _hub_user_staff():
    from tests.achilles.factories import UserFactory

    staff = UserFactory(username="browser-hub-staff", is_staff=True)
    staff.groups.add(hub_group_ensure())
    return staff


def _comments(emulator, key: str) -> list[str]:
    return [c["body"] for c in emulator.issue(key)["fields"]["comment"]["comments"]]


def test_a_comment_sent_from_the_hub_page_lands_in_jira_and_the_page_shows_it_done(
    live_url, page, user_factory, sync_agent
):
    from hub.models import SyncRun
    from tests.syncagent.harness import wait_until

    # given: the sync agent has mirrored the emulator's project AURORA; a hub user on the page
    wait_until(lambda: SyncRun.objects.filter(kind="full", status="ok").exists(), 60, "the first full sync")
    user = _hub_user(user_factory, "browser-hub")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/hub/")
    # then: the mirror's issues, filterable by text, with a card
    expect(page.locator("#issues li.issue").first).to_be_visible()
    assert page.locator("#issues li.issue").count() == 25 and page.is_visible("#issues-more")
    page.fill("#filters input[name=text]", "AURORA-9001")
    page.click("#filters button[type=submit]")
    expect(page.locator("#issues li.issue")).to_have_count(1)
    page.click("#issues li.issue button.link")
    expect(page.locator("#card-h")).to_contain_text("AURORA-9001")
    expect(page.locator("#card-body")).to_contain_text("Комментарии (7)")
    # the hub's notes on it, saved through the notes route
    page.fill("#card-body form.notes input[name=next_step]", "Проверить на стенде")
    page.click("#card-body form.notes button[type=submit]")
    expect(page.locator("#card-body form.notes [role=status]")).to_have_text("Сохранено.")
    assert IssueNote.objects.get(issue__key="AURORA-9001").next_step == "Проверить на стенде"
    page.evaluate("window.__sameDocument = true")
    since = sync_agent.seq()
    # when: a comment goes to Jira from the card
    page.fill("#card-body form.jira-comment textarea[name=body]", "Проверено на стенде, можно закрывать.")
    page.click("#card-body form.jira-comment button[type=submit]")
    # then: the batch opens and follows the real sync agent to done, without a reload
    expect(page.locator("#card-body form.jira-comment [role=status]")).to_contain_text("Создан пакет #")
    expect(page.locator("#batch-h")).to_contain_text("Комментарий к AURORA-9001")
    expect(page.locator("#batch-summary")).to_contain_text("выполнен", timeout=30_000)
    count = page.locator("#batch-commands li.command").count()
    assert count >= 1
    expect(page.locator("#batch-commands li.command .badge")).to_have_text(["выполнена"] * count)
    assert page.evaluate("window.__sameDocument === true"), "the page was reloaded"
    # and the comment is in Jira, written once
    assert _comments(sync_agent, "AURORA-9001").count("Проверено на стенде, можно закрывать.") == 1
    assert [w for w in sync_agent.writes(since) if w.endswith("/comment")] == [
        "POST /rest/api/2/issue/AURORA-9001/comment"
    ]
    # the batches list shows it done; the agent's lines and the sync log are those of the real agent
    expect(page.locator("#batches li.batch").first.locator(".badge")).to_have_text("выполнен")
    expect(page.locator("#agent-lines")).not_to_contain_text("Загрузка")
    expect(page.locator("#agent-lines")).not_to_contain_text("ещё не выходил на связь")
    page.click("#sync-log-box summary")
    expect(page.locator("#sync-log li.row").first).to_be_visible()


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
    # nothing wider than the screen outside a scroll container (the header's sections scroll sideways in
    # their own row), no empty stretches, every field reachable
    assert layout_problems(page) == []


def test_without_the_hub_permission_the_page_is_refused(live_url, page, user_factory):
    user = user_factory(username="browser-no-hub")
    sign_in(page, live_url, user.username)
    response = page.goto(live_url + "/hub/")
    assert response.status == 403
    page.goto(live_url + "/")
    assert page.locator("header nav a[href='/hub/']").count() == 0
