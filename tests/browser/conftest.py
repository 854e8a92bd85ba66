"""A real daphne serving the test database, driven by Debian's headless Chromium (Playwright).

One daphne and one Chromium serve every test of this package (starting them took ~10 s a test on the
shared machine); each test gets a fresh browser context (cookies, storage, permissions, routes) and
its own data: ``live_url`` asks for ``transactional_db``, so what the test commits is visible to
daphne and is flushed afterwards, and the suite's cache namespace is emptied before each test. Before
a test ends, daphne is left idle (no request of the test still touching the database), so nothing of
one test lands in the next. Under pytest-xdist the package's tests stay on one worker, one after the
other (``tests/conftest.py``'s scheduler): Playwright's sync API keeps an event loop running on the thread while it
lives, which no other test may see.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import pytest

from tests.processes import start_daphne, stop, wait_database_idle

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# The chat socket's idle limits, lowered for the package's daphne so that the idle-socket test
# (test_chat_page.py) sees a socket outlast every one of them in seconds instead of a minute:
# daphne's keepalive ping (its defaults, which production keeps: every 20 s, 30 s for the pong) and
# the channel layer's health check (30 s). The layer's blocking pop stays channels_redis's 5 s.
PING_INTERVAL_SECONDS = 2
PING_TIMEOUT_SECONDS = 5
LAYER_HEALTH_CHECK_SECONDS = 6


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


class Daphne:
    """The package's daphne on the test database; started again if it ever died."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.log = directory / "daphne.log"
        self.proc = None
        self.url = ""

    def answers(self) -> bool:
        import httpx

        try:
            return httpx.get(self.url + "/healthz", timeout=2).status_code in (200, 503)
        except httpx.HTTPError:
            return False

    def ensure(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self.answers():
            return
        if self.proc is not None:
            stop(self.proc)
        port = _free_port()
        self.proc = start_daphne(
            self.log,
            port,
            extra=("--ping-interval", str(PING_INTERVAL_SECONDS), "--ping-timeout", str(PING_TIMEOUT_SECONDS)),
            env={"CHANNEL_LAYER_HEALTH_CHECK_SECONDS": str(LAYER_HEALTH_CHECK_SECONDS)},
        )
        self.url = f"http://127.0.0.1:{port}"
        # The first request imports the URLconf (the API's schemas; SCIM's models wait for the first SCIM
        # request: achilles/urls.py): ~1.4 s at load 7, 5.4 s with SCIM's models in it
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.answers():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.proc.kill()
        pytest.fail("daphne did not start: " + self.log.read_text()[-2000:])

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


@pytest.fixture(scope="package")
def _daphne(django_db_setup, tmp_path_factory):
    server = Daphne(tmp_path_factory.mktemp("daphne"))
    yield server
    server.stop()


class DaphneLog:
    """What daphne logged while this test ran."""

    def __init__(self, server: Daphne):
        self.server = server
        self.start = server.log_size()

    def read_text(self) -> str:
        with open(self.server.log, encoding="utf-8", errors="replace") as log:
            log.seek(self.start)
            return log.read()


@pytest.fixture
def daphne_log(live_url, _daphne) -> DaphneLog:
    return _daphne.test_log


@pytest.fixture
def live_url(transactional_db, _daphne):
    """The package's daphne on the test database (committed data is visible to it): its URL."""
    _daphne.ensure()
    _daphne.test_log = DaphneLog(_daphne)
    yield _daphne.url
    wait_database_idle()


@pytest.fixture(scope="package")
def _browser(chromium_path):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread while it lives; the tests' own ORM
    # calls (and their fixtures' flushes) are still plain synchronous calls, so Django's
    # async-safety guard is lifted for them.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
    finally:
        playwright.stop()
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def page(_browser):
    """A page in a fresh browser context (nothing kept from another test)."""
    context = _browser.new_context(locale="ru-RU")
    page = context.new_page()
    page.set_default_timeout(20_000)
    # The pages run under the real Content-Security-Policy: any violation fails the test.
    violations: list[str] = []
    page.on(
        "console",
        lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None,
    )
    try:
        yield page
        assert not violations, f"CSP violations: {violations}"
    finally:
        context.close()


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
