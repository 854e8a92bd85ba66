"""The Content-Security-Policy in a real browser (issue 10, finding 11): the admin and the OpenAPI
explorer work under it (the page fixture fails a test on any CSP violation in the console)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser]


def test_the_admin_and_the_api_explorer_run_under_the_policy(live_url, page, user_factory):
    user_factory(username="browser-admin", is_staff=True, is_superuser=True)
    sign_in(page, live_url, "browser-admin")
    response = page.goto(live_url + "/admin/achilles/auditevent/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector("#changelist-filter")
    response = page.goto(live_url + "/api/docs")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(".swagger-ui .info .title")
