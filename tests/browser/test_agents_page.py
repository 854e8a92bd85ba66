"""The agents page in a real browser, with a real Celery worker carrying out "run now"."""

import time

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.processes import start_celery_worker, stop

pytestmark = [pytest.mark.browser, pytest.mark.p1]

# How long a run may take to end: a fresh worker's start and the run, with room for a loaded machine
# (30 s was too little at load 13). The waits end as soon as the run has.
RUN_SECONDS = 120
RUN_ENDED = ("succeeded", "failed", "skipped")


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path):
    proc = start_celery_worker(tmp_path / "worker.log", "browser", loglevel="WARNING")
    yield proc
    stop(proc)


def test_create_an_agent_run_it_now_and_see_the_outcome(
    live_url, page, celery_worker_process, user_factory, model_factory
):
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user_factory(username="browser-agents")
    sign_in(page, live_url, "browser-agents")
    page.goto(live_url + "/agents/")
    # create an agent on an interval schedule
    page.fill("#name", "Сводка по отпускам")
    page.fill("#instructions", "Найди правила отпусков и перескажи их.")
    page.select_option("#schedule-type", "interval")
    page.fill("#every", "90")
    page.click("#save")
    agent = page.locator(".agent").filter(has_text="Сводка по отпускам")
    agent.wait_for()
    assert "следующий запуск: —" not in agent.text_content()
    # a malformed schedule is refused with the API's message, nothing saved
    page.fill("#name", "Плохой")
    page.select_option("#schedule-type", "calendar")
    page.fill("#time", "25:99")
    page.click("#save")
    # (locator assertions, not wait_for_function: a string predicate is an eval, which the CSP refuses)
    expect(page.locator("#form-error")).not_to_have_text("")
    assert page.locator(".agent").count() == 1
    # run it now: the worker takes the run to a final state shown in the history
    agent.locator(".run-now").click()
    expect(page.locator(".agent .note").first).to_contain_text("поставлен в очередь")
    # until the run has ended (a deadline, not a number of tries: a loaded machine's worker is slow)
    deadline = time.monotonic() + RUN_SECONDS
    while time.monotonic() < deadline:
        page.reload()
        page.locator(".agent .runs").first.wait_for()
        if page.locator(".agent .run .state-succeeded").count():
            break
        page.wait_for_timeout(500)
    assert page.locator(".agent .run .state-succeeded").count() == 1
    assert "вручную" in page.locator(".agent .run").first.text_content()


def test_run_now_is_disabled_with_its_reason_when_a_run_cannot_start(live_url, page, user_factory, model_factory):
    from agents.models import Agent
    from agents.services import agent_create

    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    owner = user_factory(username="browser-gates", timezone="Asia/Yekaterinburg")
    agent_create(owner=owner, name="Готов к запуску")
    agent_create(owner=owner, name="Выключенный", enabled=False)
    paused = agent_create(owner=owner, name="На паузе", schedule={"type": "calendar", "weekday": 0, "time": "09:30"})
    Agent.objects.filter(pk=paused.pk).update(admin_paused=True)
    sign_in(page, live_url, owner.username)
    page.goto(live_url + "/agents/")
    page.wait_for_selector(".agent .run-now")

    def card(name):
        return page.locator(".agent").filter(has_text=name)

    assert card("Готов к запуску").locator(".run-now").is_enabled()
    assert card("Готов к запуску").locator(".run-reason").text_content() == ""
    for name, reason in [("Выключенный", "Агент выключен"), ("На паузе", "приостановлен администратором")]:
        button = card(name).locator(".run-now")
        assert button.is_disabled()
        described = page.locator("#" + button.get_attribute("aria-describedby")).text_content()
        assert reason in described
    # statuses in the page's language, the schedule in the owner's zone
    assert "приостановлен администратором" in card("На паузе").locator(".badge").text_content()
    assert "выключен" in card("Выключенный").locator(".badge").text_content()


def test_a_calendar_time_like_9_30_is_accepted(live_url, page, user_factory, model_factory):
    from agents.models import Agent

    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user_factory(username="browser-time", timezone="Europe/Moscow")
    sign_in(page, live_url, "browser-time")
    page.goto(live_url + "/agents/")
    page.fill("#name", "Утренняя сводка")
    page.select_option("#schedule-type", "calendar")
    page.select_option("#weekday", "2")
    page.fill("#time", "9:30")
    # the note names the zone once /api/me has answered (the page asks for it as it loads); a locator
    # assertion, not wait_for_function: a string predicate is an eval, which the CSP refuses
    expect(page.locator("#tz-note")).to_contain_text("Europe/Moscow")
    assert "Europe/Moscow" in page.text_content("#tz-note")
    page.click("#save")
    agent = page.locator(".agent").filter(has_text="Утренняя сводка")
    agent.wait_for()
    assert Agent.objects.get(name="Утренняя сводка").schedule == {"type": "calendar", "weekday": 2, "time": "09:30"}
    info = agent.locator(".muted").first.text_content()
    assert "(Europe/Moscow)" in info and "09:30" in info


def test_subscribe_an_agent_to_jira_events_and_see_the_event_on_its_run(live_url, page, user_factory, model_factory):
    from django.utils import timezone

    from agents.models import Agent, AgentEvent, AgentRun

    model = model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    owner = user_factory(username="browser-events")
    agent = Agent.objects.create(owner=owner, name="Наблюдатель", model=model)
    run = AgentRun.objects.create(agent=agent, trigger="event", state="queued")
    AgentEvent.objects.create(
        agent=agent,
        run=run,
        issue_key="AURORA-9010",
        kinds=["transitioned"],
        changes={"status": ["To Do", "In Progress"]},
        fire_at=timezone.now(),
    )
    sign_in(page, live_url, "browser-events")
    page.goto(live_url + "/agents/")
    box = page.locator(".agent").filter(has_text="Наблюдатель")
    # the run says what woke it
    expect(box.locator(".run").first).to_contain_text("по событию")
    expect(box.locator(".run-event")).to_contain_text("AURORA-9010 · сменила статус · status: To Do → In Progress")
    # subscribe it: «AURORA, status → In Progress»
    form = box.locator("form.subscribe")
    form.locator("[name=project]").fill("aurora")
    form.locator("[name=status]").fill("In Progress")
    form.locator("button").click()
    expect(box.locator(".subscription")).to_contain_text("сменила статус: проект AURORA, статус → In Progress")
    assert list(agent.subscriptions.values_list("project", "status", "events")) == [
        ("AURORA", "In Progress", ["transitioned"])
    ]
    # and unsubscribe
    box.locator(".subscription button").click()
    expect(box.locator(".subscription")).to_have_count(0)


def test_a_runs_output_is_shown_like_a_chat_answer_with_its_sources(
    live_url, page, celery_worker_process, user_factory, model_factory
):
    """Issue 26: the run history showed raw «[1] [2]» markers and no sources; now the output is
    rendered like a chat answer with its cited sources as cards, as the real worker produced it."""
    from agents.models import Agent, AgentRun
    from knowledge.services import record_upsert

    model = model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    owner = user_factory(username="browser-run-sources")
    record_upsert(
        source_system="files",
        external_id="vacation",
        title="Политика отпусков",
        text="Ежегодный оплачиваемый отпуск сотрудника составляет 28 календарных дней.",
        acl=["everyone"],
        url="https://wiki.example.com/vacation",
    )
    Agent.objects.create(owner=owner, name="Отпуска", instructions="Сколько дней отпуска положено?", model=model)
    sign_in(page, live_url, owner.username)
    page.goto(live_url + "/agents/")
    box = page.locator(".agent").filter(has_text="Отпуска")
    box.locator(".run-now").click()
    deadline = time.monotonic() + RUN_SECONDS
    while time.monotonic() < deadline and not AgentRun.objects.filter(state__in=RUN_ENDED).exists():
        page.wait_for_timeout(200)
    run = AgentRun.objects.get()
    assert run.state == "succeeded" and "[1]" in run.output, (run.state, run.output, run.error)
    page.reload()
    output = page.locator(".agent .run .output").first
    # the marker is a link to its card, the card names the source
    expect(output.locator("a.cite").first).to_have_attribute("href", f"#src-run{run.pk}-1")
    expect(output.locator(".source").first).to_contain_text("Политика отпусков")
    expect(output.locator(".source a.title").first).to_have_attribute("href", "https://wiki.example.com/vacation")
    expect(output.locator(".source .system").first).to_have_text("Файлы")  # the label, not «files»
