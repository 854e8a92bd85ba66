"""Russian texts of the hub shared by REST and MCP (the seed's exact lines).

The agent's status lines go through gettext: the hub page reads them in its reader's language
(locale/en), while MCP, routed outside Django's middleware, keeps the seed's Russian."""

from __future__ import annotations

import datetime as dt
import zoneinfo

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from hub.contracts import AgentStatus


def claimed_command_line(command_id: int) -> str:
    return (
        f"команда #{command_id} уже у агента и будет выполнена; "
        f"остановить — `POST /commands/{command_id}/cancel` с `force: true`"
    )


LAUNCHER_UNKNOWN = gettext_noop("запускатель: неизвестно (агент ещё не выходил на связь после перезапуска хаба)")
NO_LAUNCHER = gettext_noop("без запускателя")


def when(value: dt.datetime | None, tz: str = "UTC") -> str:
    """One date format for the hub's texts, in the given (the organisation's) time zone."""
    if value is None:
        return "—"
    return value.astimezone(zoneinfo.ZoneInfo(tz)).strftime("%d.%m.%Y %H:%M")


def update_hint(
    *,
    state: str | None,
    version: int | None,
    update_from: int | None,
    update_to: int | None,
    error: str,
    launcher_version: int | None,
    agent_reported: bool,
    publication_version: int | None,
) -> str | None:
    """What the admin should know about the sync agent's updates, or None."""
    reason = error or "причина не сообщена"
    if state == "rolled_back" and update_to is not None:
        back_to = update_from if update_from is not None else version
        return f"откат с v{update_to} на v{back_to}: {reason}"
    if state == "failed" and update_to is not None:
        return f"обновление до v{update_to} не удалось: {reason}"
    if publication_version is not None and version is not None and publication_version > version and agent_reported:
        if launcher_version is None:
            return (
                f"агент запущен без run.py и сам не обновится: опубликована v{publication_version}, у агента v{version}"
            )
        if state not in ("downloading", "starting"):
            return f"опубликована v{publication_version}, агент на v{version}: запускатель обновит его при следующем опросе"
    return None


def agent_status_lines(status: AgentStatus, *, tz: str = "UTC") -> list[str]:
    """The seed's agent_status answer, line by line (times in ``tz``)."""
    lines: list[str] = []
    if not status.has_contact:
        lines.append(_("агент офлайн: ещё не выходил на связь"))
    elif status.online:
        lines.append(_("агент онлайн (последний контакт: %(when)s)") % {"when": when(status.last_contact_at, tz)})
    else:
        lines.append(_("агент офлайн (последний контакт: %(when)s)") % {"when": when(status.last_contact_at, tz)})
    lines.append(
        _("версия: v%(version)s") % {"version": status.version}
        if status.version is not None
        else _("версия: неизвестна")
    )
    current = status.current_command
    if current is not None:
        keys = f" {current.key}" if current.key else ""
        lines.append(
            _("текущая команда: #%(id)s %(type)s%(keys)s (выдач: %(claims)s)")
            % {"id": current.id, "type": current.type, "keys": keys, "claims": current.claims}
        )
    else:
        lines.append(_("текущая команда: нет"))
    if status.reissued:
        lines.append(_("довыданные команды:"))
        lines.extend(
            _("- команда #%(id)s %(type)s: выдач %(claims)s") % {"id": c.id, "type": c.type, "claims": c.claims}
            for c in status.reissued
        )
    else:
        lines.append(_("довыданных команд нет"))
    lines.append(_("429 за сутки: %(count)s") % {"count": status.rate_limited_24h})
    agent_side = (
        " " + _("(у агента: %(version)s)") % {"version": status.agent_settings_version}
        if status.agent_settings_version not in (None, status.settings_version)
        else ""
    )
    lines.append(_("версия настроек: %(version)s") % {"version": status.settings_version} + agent_side)
    if status.publication is not None:
        lines.append(
            _("публикация: v%(version)s от %(when)s")
            % {"version": status.publication.version, "when": when(status.publication.published_at, tz)}
        )
    else:
        lines.append(_("публикации нет"))
    if status.update_state:
        if status.update_from is not None and status.update_to is not None:
            lines.append(
                _("обновление: %(state)s v%(old)s → v%(new)s")
                % {"state": status.update_state, "old": status.update_from, "new": status.update_to}
            )
        else:
            lines.append(_("обновление: %(state)s") % {"state": status.update_state})
    if not status.agent_reported:
        lines.append(_(LAUNCHER_UNKNOWN))
    elif status.launcher_version is not None:
        lines.append(_("запускатель: v%(version)s") % {"version": status.launcher_version})
    else:
        lines.append(_(NO_LAUNCHER))
    if status.update_hint:
        lines.append(status.update_hint)
    return lines
