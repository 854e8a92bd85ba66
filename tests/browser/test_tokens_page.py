"""The tokens page: the new secret is copied with one click, a revoke asks first."""

import pytest
from playwright.sync_api import expect

from achilles.models import ApiToken
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.p1]


def test_copy_the_new_secret_and_confirm_before_revoking(live_url, page, user_factory):
    user_factory(username="browser-copy")
    sign_in(page, live_url, "browser-copy")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_url)
    page.goto(live_url + "/tokens/")
    page.fill("input[name=name]", "ноутбук")
    page.click("text=Создать")
    secret = page.text_content("#new-token")
    page.click("#copy-token")
    expect(page.locator("#copied")).to_have_text("скопировано")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    # a revoke the user cancels changes nothing
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("text=Отозвать")
    page.wait_for_timeout(300)
    assert ApiToken.objects.get(name="ноутбук").revoked_at is None
    # confirmed, it is revoked
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("text=Отозвать")
    page.wait_for_selector("text=Токен отозван.")
    assert ApiToken.objects.get(name="ноутбук").revoked_at is not None
