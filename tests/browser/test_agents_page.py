"""The agents page in a real browser, with a real Celery worker carrying out "run now"."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.processes import start_celery_worker, stop

pytestmark = [pytest.mark.browser, pytest.mark.p1]


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path):
    proc = start_celery_worker(tmp_path / "worker.log", "browser", loglevel="WARNING")
    yield proc
    stop(proc)


def test_create_an_agent_run_it_now_and_see_the_outcome(live_url, page, celery_worker_process, user_factory,
                                                        model_factory):
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
    for _ in range(40):
        page.reload()
        page.locator(".agent .runs").first.wait_for()
        if page.locator(".agent .run .state-succeeded").count():
            break
        page.wait_for_timeout(500)
    assert page.locator(".agent .run .state-succeeded").count() == 1
    assert "вручную" in page.locator(".agent .run").first.text_content()
