"""Interface languages in a real browser: every page in English shows no Cyrillic UI text and in
Russian no English UI text (content — what people wrote, names, IANA zones — excepted), the pages'
scripts included; switching the language on the settings page takes effect at once."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from achilles.services import api_token_create, api_token_revoke
from agents.models import AgentRun
from agents.services import agent_create
from conversations.models import Conversation, Message
from hub.permissions import hub_group_ensure
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.p1]

PAGES = [
    "/",
    "/chat/",
    "/knowledge/",
    "/agents/",
    "/hub/",
    "/tokens/",
    "/usage/me/",
    "/usage/",
    "/settings/",
    "/admin/",
]

# Every text a person reads on the page: text nodes (hidden ones too: they show at some point),
# the attributes screen readers and tooltips read, the title. Left out: scripts, code, the user's
# content (messages, titles, names, below) and anything marked as another language (lang="…", e.g.
# «English» in the language chooser of a Russian page).
UI_TEXTS = """(content) => {
  const lang = document.documentElement.lang;
  const skip = e => e.closest('script, style, template, code, pre, svg, #recent-conversations a, #my-agents a, '
      + '.thread .title, #thread-title, .msg .text, .msg.user, .sources .title, .sources .passage, .sources .system, '
      + '.withheld > span, .agent > h3, .agent .muted, .who, select[name=timezone], .name, .group, ' + content)
      || [...document.querySelectorAll('[lang]')].some(x => x !== document.documentElement && x.lang !== lang && x.contains(e));
  const out = [document.title];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, text = node.textContent.trim();
    if (text && node.parentElement && !skip(node.parentElement)) out.push(text);
  }
  document.querySelectorAll('[placeholder], [title], [aria-label], [alt]').forEach(e => {
    if (skip(e)) return;
    for (const name of ['placeholder', 'title', 'aria-label', 'alt']) {
      const value = (e.getAttribute(name) || '').trim(); if (value) out.push(value);
    }
  });
  return out;
}"""

CYRILLIC = re.compile(r"[А-Яа-яЁё]")
# Words a Russian page rightly shows in Latin letters: the product, protocols and formats, keys.
LATIN_ALLOWED = {
    "achilles", "api", "rest", "mcp", "authorization", "bearer", "csv", "pdf", "docx", "pptx", "xlsx",
    "html", "markdown", "eml", "enter", "shift", "esc", "jira", "confluence", "ocr", "ai", "mail", "iana",
    "europe", "moscow", "utc", "builtin", "extractive", "scim", "ldap", "openid", "connect", "active",
    "directory", "django", "docs", "crontab", "usd",
    # a source's key where no admin has labelled it (SourcePolicy.display_label)
    "hub",
}  # fmt: skip


def _seed(user, *, title: str, question: str, answer: str, agent: str) -> Conversation:
    user.groups.add(hub_group_ensure())
    conversation = Conversation.objects.create(user=user, title=title)
    Message.objects.create(conversation=conversation, role="user", content=question)
    Message.objects.create(
        conversation=conversation, role="assistant", content=answer, model="builtin-extractive", tokens_used=584
    )
    created = agent_create(owner=user, name=agent, schedule={"type": "interval", "every_minutes": 90})
    # a finished run in the agent's history, a token and a revoked one on the tokens page
    now = timezone.now()
    AgentRun.objects.create(
        agent=created,
        trigger="manual",
        state="succeeded",
        output="42",
        tokens_used=1204,
        started_at=now,
        finished_at=now,
    )
    token, _secret = api_token_create(user=user, name="laptop")
    api_token_create(user=user, name="ci")
    api_token_revoke(user=user, token_id=token.pk)
    return conversation


def _visit_all(page, live_url: str, conversation: Conversation, content: str = "") -> dict[str, list[str]]:
    texts = {}
    for path in [*PAGES, f"/chat/?c={conversation.pk}"]:
        page.goto(live_url + path)
        page.wait_for_load_state("networkidle")
        texts[path] = page.evaluate(UI_TEXTS, content or "#none")
    return texts


def test_english_pages_show_no_russian(live_url, _browser, user_factory, model_factory):
    # given: an English-speaking browser and a person who chose English, with content on every page
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-en", is_staff=True, is_superuser=True, language="en")
    conversation = _seed(
        user, title="Travel rules", question="Per diem?", answer="Per diem is 700 a day [1].", agent="Weekly digest"
    )
    context = _browser.new_context(locale="en-US")
    page = context.new_page()
    try:
        # the sign-in page by the browser's language
        page.goto(live_url + "/accounts/login/")
        assert page.evaluate("document.documentElement.lang") == "en"
        assert not [t for t in page.evaluate(UI_TEXTS, "#none") if CYRILLIC.search(t)]
        sign_in(page, live_url, user.username)
        # when
        texts = _visit_all(page, live_url, conversation)
        # then
        russian = {path: [t for t in found if CYRILLIC.search(t)] for path, found in texts.items()}
        assert {path: found for path, found in russian.items() if found} == {}
        assert "584 tokens" in " ".join(texts[f"/chat/?c={conversation.pk}"])
        assert "1,204 tokens" in texts["/agents/"] and "revoked" in " ".join(texts["/tokens/"])
    finally:
        context.close()


def test_russian_pages_show_no_english(live_url, page, user_factory, model_factory):
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user = user_factory(username="browser-ru", is_staff=True, is_superuser=True)
    conversation = _seed(
        user, title="Командировки", question="Суточные?", answer="Суточные — 700 рублей [1].", agent="Сводка"
    )
    sign_in(page, live_url, user.username)
    texts = _visit_all(page, live_url, conversation)
    own_name = {"browser", "ru"}  # the user's name, «browser-ru», greets them (content)
    english = {
        path: sorted(
            {w for t in found for w in re.findall(r"[A-Za-z]{2,}", t) if w.lower() not in LATIN_ALLOWED | own_name}
        )
        for path, found in texts.items()
    }
    assert {path: words for path, words in english.items() if words} == {}
    assert "584 токена" in " ".join(texts[f"/chat/?c={conversation.pk}"])
    assert "1\u00a0204 токена" in texts["/agents/"] and "отозван" in " ".join(texts["/tokens/"])


def test_switching_the_language_in_settings_takes_effect(live_url, page, user_factory):
    # given: a Russian browser, nothing chosen
    user = user_factory(username="browser-switch")
    sign_in(page, live_url, user.username)
    page.goto(live_url + "/settings/")
    assert page.text_content("h2") == "Настройки"
    # when: English chosen and saved
    page.select_option("select[name=language]", "en")
    page.click("main form button[type=submit]")
    page.wait_for_load_state("networkidle")
    # then: this page, the next ones and their scripts speak English
    assert page.text_content("h2") == "Settings" and "Settings saved." in page.text_content("main")
    assert page.evaluate("document.documentElement.lang") == "en"
    page.goto(live_url + "/chat/")
    page.wait_for_selector("#threads p.muted:has-text('No conversations yet.')")
    assert page.get_attribute("#q", "placeholder") == "Message…"
    # and back to the browser's language
    page.goto(live_url + "/settings/")
    page.select_option("select[name=language]", "")
    page.click("main form button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert page.text_content("h2") == "Настройки" and "Настройки сохранены." in page.text_content("main")
