"""The platform's pages and admin as people meet them: an icon, one time zone, an admin branded and
in Russian with the libraries' internals kept for superusers, labelled list checkboxes."""

import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from agents.services import agent_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_favicon_ico_is_the_platforms_icon_not_a_404(client):
    response = client.get("/favicon.ico", follow=True)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")


def test_pages_name_their_icon_and_the_readers_time_zone(user_factory, client_for):
    reader = user_factory(username="tz-reader", timezone="Asia/Yekaterinburg")
    html = client_for(reader).get("/").content.decode()
    assert '<link rel="icon"' in html
    assert '<meta name="time-zone" content="Asia/Yekaterinburg">' in html
    # without a zone of their own: the organisation's
    html = client_for(user_factory(username="tz-org")).get("/").content.decode()
    assert '<meta name="time-zone" content="Europe/Moscow">' in html


def test_admin_shows_a_0930_moscow_slot_as_0930(admin_user, user_factory, client_for, model_factory):
    model_factory(name="chat-model", is_default=True)
    # given: a Moscow owner's Monday 09:30 agent (06:30 UTC), and an admin of the same organisation
    owner = user_factory(username="msk-owner", timezone="Europe/Moscow")
    agent = agent_create(
        owner=owner,
        name="Понедельничная сводка",
        schedule={"type": "calendar", "weekday": 0, "time": "09:30"},
        now=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
    )
    assert agent.next_run_at == datetime(2026, 12, 7, 6, 30, tzinfo=UTC)
    # when
    html = client_for(admin_user).get(reverse("admin:agents_agent_changelist")).content.decode()
    # then: the slot in the reader's zone, the schedule with the zone it is read in
    row = html[html.index("Понедельничная сводка") :]
    assert re.search(r"7 декабря 2026 г\. 9:30", row), row[:1500]
    assert "6:30" not in row[:1500]
    assert "пн 09:30 (Europe/Moscow)" in row


def test_admin_paused_checkboxes_have_a_label(admin_user, user_factory, client_for, model_factory):
    model_factory(name="chat-model", is_default=True)
    agent_create(owner=user_factory(username="paused-owner"), name="Отчёт")
    html = client_for(admin_user).get(reverse("admin:agents_agent_changelist")).content.decode()
    checkbox = re.search(r'<input type="checkbox" name="form-0-admin_paused"[^>]*>', html).group(0)
    assert 'aria-label="Приостановить агента «Отчёт»"' in checkbox
    assert "Приостановить выбранных агентов" in html and "Pause selected" not in html


def test_admin_is_branded_and_in_russian(admin_user, client_for):
    html = client_for(admin_user).get(reverse("admin:index")).content.decode()
    assert "<title>Администрирование | Achilles</title>" in html
    assert "Django" not in html
    for english in ("Batchs", "Platform settings", "Mirror issues", "Allowed models", "Agent runs"):
        assert english not in html
    for russian in ("Пакеты команд", "Настройки платформы", "Задачи зеркала", "Разрешённые модели"):
        assert russian in html
    page = client_for(admin_user).get(reverse("admin:achilles_platformsettings_changelist")).content.decode()
    assert "platform settings" not in page


def test_internal_apps_are_for_superusers_only(user_factory, client_for):
    from django.contrib.auth.models import Permission

    # given: a staff member who somehow holds every permission, and a superuser
    staff = user_factory(username="staff-all", is_staff=True)
    staff.user_permissions.set(Permission.objects.all())
    root = user_factory(username="root-all", is_staff=True, is_superuser=True)
    # then: the staff member sees neither the lockout tables nor the beat's schedule rows
    index = client_for(staff).get(reverse("admin:index")).content.decode()
    assert (
        "Блокировки входа" not in index
        and "Axes" not in index
        and "Астрономические события" not in index
        and "Периодические задачи" not in index
    )
    assert client_for(staff).get(reverse("admin:axes_accessattempt_changelist")).status_code == 403
    assert client_for(staff).get(reverse("admin:django_celery_beat_solarschedule_changelist")).status_code == 403
    # the superuser does
    index = client_for(root).get(reverse("admin:index")).content.decode()
    assert "Блокировки входа" in index and "Астрономические события" in index
