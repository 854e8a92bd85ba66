"""The two addresses `make run` advertises, opened in a real browser against daphne: every CSS and
JS file they reference loads and the page is styled (issue 9: /admin/ had no CSS, /api/docs was
blank — failed before the app served its static files)."""

import pytest

from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.p1]


def _watch_assets(page) -> list:
    loaded = []
    page.on(
        "response",
        lambda r: loaded.append((r.url, r.status, r.request.resource_type))
        if r.request.resource_type in ("stylesheet", "script")
        else None,
    )
    return loaded


def test_admin_and_api_docs_are_styled(live_url, page, admin_user):
    loaded = _watch_assets(page)
    sign_in(page, live_url, admin_user.username)
    page.goto(live_url + "/admin/")
    page.wait_for_load_state("networkidle")
    admin_assets = list(loaded)
    assert any(kind == "stylesheet" for _, _, kind in admin_assets)
    assert all(status == 200 for _, status, _ in admin_assets), admin_assets
    # the admin's stylesheet is applied: the header has its coloured background, not the default
    header_bg = page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
    assert header_bg not in ("rgba(0, 0, 0, 0)", "transparent")

    loaded.clear()
    page.goto(live_url + "/api/docs")
    # Swagger UI's bundle ran and drew the operations of the API
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    kinds = {kind for _, _, kind in loaded}
    assert {"stylesheet", "script"} <= kinds
    assert all(status == 200 for _, status, _ in loaded), loaded
    assert page.locator(".swagger-ui .opblock").count() > 10
