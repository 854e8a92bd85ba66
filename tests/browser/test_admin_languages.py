"""The admin in one language: every registered model's list, one of its rows and its add form (where
adding is allowed), walked in a real browser as a superuser — in Russian no English word outside
content, in English no Cyrillic. Field labels, help texts, filter titles, column headers, actions,
fieldset titles and the admin's own chrome all count; what people or the sources wrote (the rows'
values, an object's name in the title and breadcrumbs, a text area's content) does not."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from achilles import compat
from achilles.audit import audit_record
from achilles.models import AllowedModel, PlatformSettings
from achilles.scim.services import scim_token_create
from achilles.services import api_token_create
from agents.models import AgentRun
from agents.services import agent_create
from hub import protocol
from hub import services as hub_services
from hub.models import (
    IssueNote,
    MirrorComment,
    MirrorIssue,
    MirrorLink,
    Publication,
    RateLimitEvent,
    SyncAgentContact,
    SyncRun,
)
from knowledge import facade
from knowledge.connectors.models import Connector, ConnectorRun
from knowledge.models import AccessSignal, Document, Record, RecordLink, SourcePolicy
from tests.browser.conftest import sign_in
from tests.browser.test_languages import CYRILLIC, LATIN_ALLOWED

pytestmark = [pytest.mark.browser, pytest.mark.p1]

# The platform's own apps, and Django's groups (the admin's Russian comes with Django). The libraries'
# tables (django-axes, django_celery_beat, allauth) are a superuser's internals and speak their own
# catalogs.
APPS = {"achilles", "knowledge", "agents", "hub", "conversations", "usage", "auth"}

# Latin words a Russian admin rightly shows besides the web pages' ones: abbreviations and names of formats
# and products its fields speak of, and the keys Django's own Russian names (the multiple-choice hint
# «Удерживайте “Control“ (или “Command“ на Mac)…», the add-user form's «Single Sing-On»).
ADMIN_LATIN_ALLOWED = LATIN_ALLOWED | {
    "id", "acl", "sha", "json", "jql", "searxng", "celery", "server", "data", "center",
    "control", "command", "mac", "single", "sing", "sign", "on",
}  # fmt: skip

# What a person reads on an admin page, as test_languages's UI_TEXTS, with the admin's content left
# out: the rows of a list and the values of a filter's choices (what the rows hold), read-only
# values, text areas, options naming other rows, the object's own name (the subtitle, the last
# step of the breadcrumbs, the first part of the title).
ADMIN_TEXTS = """() => {
  const skip = e => e.closest('script, style, template, code, pre, svg, #result_list tbody, #changelist-filter li, '
      + '.readonly, textarea, .related-widget-wrapper, #content > h2, #user-tools strong, .tabular tbody td, '
      + '.inline-related h3 b, .inline-related h3 .inline_label, .vForeignKeyRawIdAdminField ~ strong, bdi, '
      + '.messagelist, .selector-available select, .selector-chosen select, .paginator .this-page, .date-hierarchy a')
      || [...document.querySelectorAll('[lang]')].some(x => x !== document.documentElement
          && x.lang !== document.documentElement.lang && x.contains(e));
  const title = document.title.split(' | ');
  const out = [document.querySelector('.change-form, .delete-confirmation') ? title.slice(1).join(' | ') : title.join(' | ')];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, text = node.textContent.trim();
    const parent = node.parentElement;
    if (!text || !parent || skip(parent)) continue;
    // the object's own name closes the breadcrumbs of its page, a bare text after the last link
    if (parent.classList.contains('breadcrumbs') && !node.nextSibling && document.querySelector('.change-form')) continue;
    out.push(text);
  }
  document.querySelectorAll('[placeholder], [title], [aria-label], [alt]').forEach(e => {
    if (skip(e)) return;
    for (const name of ['placeholder', 'title', 'aria-label', 'alt']) {
      const value = (e.getAttribute(name) || '').trim(); if (value) out.push(value);
    }
  });
  return out;
}"""


def _seed(admin) -> None:
    """A row of every platform model the admin shows."""
    now = timezone.now()
    PlatformSettings.objects.get_or_create(id=1)
    AllowedModel.objects.create(name="builtin-extractive", provider="builtin", is_default=True)
    api_token_create(user=admin, name="ноутбук")
    scim_token_create(name="entra")
    audit_record(actor=admin, action="agent.paused", target="agent:1", details={"reason": "проверка"})
    Group.objects.create(name="бухгалтерия")
    # knowledge
    first = facade.upsert_record(
        source_system="files", external_id="otpusk", title="Отпуск", text="Отпуск 28 дней.", acl=["everyone"]
    )
    second = facade.upsert_record(
        source_system="files", external_id="bolnichny", title="Больничный", text="Больничный.", acl=["everyone"]
    )
    RecordLink.objects.create(from_record_id=first, to_record_id=second)
    AccessSignal.objects.create(record_id=first, kind=AccessSignal._meta.get_field("kind").choices[0][0])
    SourcePolicy.objects.create(source_system="files", display_label="Файлы")
    Document.objects.create(
        owner=admin, filename="отпуск.txt", format="text", size=4, sha256="", content=b"text", acl=["everyone"]
    )
    connector = Connector.objects.create(kind="confluence", name="вики", base_url="https://wiki.example.com")
    ConnectorRun.objects.create(connector=connector, state="succeeded", seen=3, started_at=now, finished_at=now)
    assert Record.objects.count() == 2
    # agents
    agent = agent_create(owner=admin, name="Сводка", schedule={"type": "interval", "every_minutes": 90})
    AgentRun.objects.create(
        agent=agent, trigger="manual", state="succeeded", output="42", tokens_used=1204, started_at=now, finished_at=now
    )
    # hub
    issue = MirrorIssue.objects.create(
        key="AURORA-1", project="AURORA", summary="Сверка", status="В работе", updated=now, content_sha256="0" * 64
    )
    MirrorLink.objects.create(issue=issue, link_type="Связь", direction="outward", other_key="AURORA-2")
    MirrorComment.objects.create(issue=issue, jira_id="10", author="Анна", created=now, body="Проверено.")
    IssueNote.objects.create(issue=issue, fact_status="в работе", owner="Анна", updated_by=admin)
    hub_services.batch_create(
        user=admin, title="Комментарий", commands=[{"type": "ensure_comment", "key": "AURORA-1", "body": "Да."}]
    )
    sync_agent, _raw = protocol.sync_agent_create(name="office-pc")
    SyncAgentContact.objects.create(sync_agent=sync_agent, last_contact_at=now, last_claim_at=now, version=3)
    RateLimitEvent.objects.create(sync_agent=sync_agent, at=now - timedelta(minutes=1), retry_after_seconds=2)
    SyncRun.objects.create(sync_agent=sync_agent, kind="incremental", status="ok", finished_at=now)
    artifact = b"artifact"
    Publication.objects.create(
        version=1, artifact=artifact, sha256=hashlib.sha256(artifact).hexdigest(), size=len(artifact)
    )
    hub_services.settings_set(user=admin, key="poll_interval_seconds", value=10)


def _admin_pages() -> list[str]:
    """Per registered platform model: its list, its first row's page and its add form."""
    from django.contrib import admin
    from django.urls import reverse

    pages = []
    for model in compat.admin_site_registry(admin.site):
        meta = model._meta
        if meta.app_label not in APPS:
            continue
        pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        first = model._default_manager.order_by("pk").first()
        assert first is not None, f"no {meta.label} to show"
        pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[first.pk]))
        pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_add"))  # refused where not allowed
    pages.append(reverse("admin:knowledge_search_preview") + "?query=%D0%BE%D1%82%D0%BF%D1%83%D1%81%D0%BA&k=8")
    return pages


def _walk(page, live_url: str) -> dict[str, list[str]]:
    texts = {}
    for path in _admin_pages():
        response = page.goto(live_url + path, wait_until="domcontentloaded")
        if response.status == 403 and path.endswith("/add/"):
            continue  # adding is not allowed here
        assert response.status == 200, path
        texts[path] = page.evaluate(ADMIN_TEXTS)
    return texts


def test_the_russian_admin_shows_no_english(live_url, page, user_factory):
    admin = user_factory(username="админ", is_staff=True, is_superuser=True)
    _seed(admin)
    sign_in(page, live_url, admin.username)
    texts = _walk(page, live_url)
    english = {
        path: sorted({w for t in found for w in re.findall(r"[A-Za-z]{2,}", t) if w.lower() not in ADMIN_LATIN_ALLOWED})
        for path, found in texts.items()
    }
    found = {path: words for path, words in english.items() if words}
    assert found == {}, "\n".join(f"{path}: {words}" for path, words in found.items())


def test_the_english_admin_shows_no_russian(live_url, _browser, user_factory):
    admin = user_factory(username="admin-en", is_staff=True, is_superuser=True, language="en")
    _seed(admin)
    context = _browser.new_context(locale="en-US")
    page = context.new_page()
    try:
        sign_in(page, live_url, admin.username)
        texts = _walk(page, live_url)
    finally:
        context.close()
    russian = {path: sorted({t for t in found if CYRILLIC.search(t)}) for path, found in texts.items()}
    shown = {path: found for path, found in russian.items() if found}
    assert shown == {}, "\n".join(f"{path}: {found}" for path, found in shown.items())
