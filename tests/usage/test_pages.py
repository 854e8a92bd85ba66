"""The «Расходы AI» page and «Мои расходы» render the roll-up's sums (amounts only, never content)."""

from __future__ import annotations

import re

import pytest

from achilles.platform import platform_settings_update

pytestmark = [pytest.mark.integration, pytest.mark.p1, pytest.mark.django_db]


def _text(response) -> str:
    return re.sub(r"[ \t\r\n]+", " ", response.content.decode())


def test_the_admin_page_shows_totals_chart_tables_and_drill_down(spend, client, user_factory):
    admin = user_factory(username="root", is_staff=True)
    client.force_login(admin)
    response = client.get("/usage/", {"period": "custom", "from": "2026-11-22", "to": "2026-11-29", "person": "alice"})
    assert response.status_code == 200
    html = _text(response)
    assert 'data-total="tokens">1\u202f520<' in html  # 460 + 60 + 1000
    assert html.count("<rect ") == 3  # Sunday's answer, Monday's answer and run (stacked by model)
    assert 'data-tokens="60"' not in html and 'data-tokens="520"' in html and 'data-tokens="1000"' in html
    assert "Сводка" in html and "fake-chat" in html and "finance" in html
    # the drill-down names the conversation by id and date, never by what was asked or answered
    assert 'id="person-conversations"' in html
    for content in ("Первый вопрос", "Второй вопрос", "Первый ответ", "Второй ответ"):
        assert content not in html


def test_the_weekly_budget_share_of_an_agent_owner(spend, client, user_factory, time_machine):
    time_machine.move_to("2026-11-25T12:00:00+00:00")
    platform_settings_update(weekly_token_budget=1250)
    client.force_login(user_factory(username="root", is_staff=True))
    html = _text(client.get("/usage/"))
    assert '<span class="share near">80 %</span>' in html  # bob: 1 000 of 1 250 this week


def test_a_user_without_the_permission_gets_403(spend, client):
    client.force_login(spend["bob"])
    assert client.get("/usage/").status_code == 403


def test_my_spend_this_week_and_month_and_budget_left(spend, client, time_machine):
    time_machine.move_to("2026-11-25T12:00:00+00:00")
    platform_settings_update(weekly_token_budget=4000)
    client.force_login(spend["bob"])
    html = _text(client.get("/usage/me/"))
    assert "потрачено <strong>1\u202f000</strong> из 4\u202f000, осталось <strong>3\u202f000</strong>" in html
    assert "Сводка" in html and "agent-model" in html
