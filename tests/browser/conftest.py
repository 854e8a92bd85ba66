"""A real daphne serving the test database, driven by Debian's headless Chromium (Playwright)."""

from __future__ import annotations

import os
import shutil
import socket
import time

import pytest

from tests.processes import start_daphne, stop

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/browser/" in str(item.path):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium_path():
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        if os.environ.get("CI"):
            pytest.fail(f"Chromium not found at {CHROMIUM}; .ci/run installs Debian's chromium")
        pytest.skip(f"Chromium not installed ({CHROMIUM}); `apt-get install chromium` to run browser tests")
    return CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def live_url(transactional_db, tmp_path):
    """Start daphne on the test database (committed data is visible to it) and yield its URL."""
    import httpx

    port = _free_port()
    proc = start_daphne(tmp_path / "daphne.log", port)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/healthz", timeout=1)
            break
        except httpx.HTTPError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("daphne did not start: " + (tmp_path / "daphne.log").read_text()[-2000:])
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture
def page(chromium_path):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the test's own ORM calls
    # are still plain synchronous calls, so Django's async-safety guard is lifted for them.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        context = browser.new_context(locale="ru-RU")
        page = context.new_page()
        page.set_default_timeout(20_000)
        # The pages run under the real Content-Security-Policy: any violation fails the test.
        violations: list[str] = []
        page.on("console", lambda message: violations.append(message.text)
                if "Content Security Policy" in message.text else None)
        try:
            yield page
            assert not violations, f"CSP violations: {violations}"
        finally:
            browser.close()
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def sign_in(page, live_url: str, username: str, password: str = "pass-word-123") -> None:
    page.goto(live_url + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def wait_js(page, expression: str, timeout: float = 20_000) -> None:
    """Wait until ``expression`` is truthy in the page.

    Playwright's ``wait_for_function`` builds its predicate with ``eval`` inside the page, which the
    platform's Content-Security-Policy (no 'unsafe-eval') refuses; ``page.evaluate`` goes through
    the DevTools protocol, which the policy does not govern, so the polling happens here.
    """
    import time

    deadline = time.monotonic() + timeout / 1000
    while True:
        if page.evaluate(expression):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} ms waiting for: {expression}")
        time.sleep(0.05)
