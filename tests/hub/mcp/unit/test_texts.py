"""The MCP answers (seed 004 result texts) rendered from hand-made read models: no database."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from hub.contracts import (
    AgentStatus,
    BatchCancelResult,
    BatchCreated,
    BatchSummary,
    BatchView,
    CommandView,
    CommentView,
    IssueCard,
    IssueRow,
    LinkView,
    NotesView,
    PublicationView,
    ReissuedCommand,
    SyncRunView,
)
from hub.mcp import texts

T0 = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)


def row(key="AURORA-1538", **kw) -> IssueRow:
    base = {
        "key": key,
        "project": "AURORA",
        "summary": "Починить экспорт",
        "status": "In Progress",
        "issue_type": "Task",
        "priority": "High",
        "assignee": "jdoe",
        "duedate": dt.date(2026, 12, 1),
        "sprint": "Спринт 2",
        "labels": ("AWPCA",),
        "updated": T0,
        "fact_status": "ждёт ревью",
    }
    return IssueRow(**(base | kw))


def command(id=40, state="done", **kw) -> CommandView:
    base = {
        "id": id,
        "batch_id": 9,
        "seq": 1,
        "type": "ensure_fields",
        "key": "AURORA-1538",
        "state": state,
        "claims": 1,
        "author": "claude",
        "payload": {},
        "result": None,
        "error": "",
        "lease_expires_at": None,
        "created_at": T0,
        "finished_at": None,
        "force_cancelled": False,
    }
    return CommandView(**(base | kw))


def batch(commands=(), state="running", finished=False, **kw) -> BatchView:
    base = {
        "id": 9,
        "title": "1538 в спринт 2",
        "author": "claude",
        "state": state,
        "finished": finished,
        "counts": {c.state: sum(1 for x in commands if x.state == c.state) for c in commands},
        "commands": tuple(commands),
        "estimate_seconds": 150,
        "created_at": T0,
        "finished_at": None,
    }
    return BatchView(**(base | kw))


def status(**kw) -> AgentStatus:
    base = {
        "online": True,
        "has_contact": True,
        "last_contact_at": T0,
        "version": 6,
        "launcher_version": 1,
        "agent_reported": True,
        "current_command": None,
        "reissued": (),
        "rate_limited_24h": 0,
        "settings_version": 4,
        "agent_settings_version": 4,
        "publication": None,
        "update_state": None,
        "update_from": None,
        "update_to": None,
        "update_error": "",
        "update_hint": None,
        "poll_interval_seconds": 10,
    }
    return AgentStatus(**(base | kw))


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("n", "word"),
    [
        (1, "команда"),
        (2, "команды"),
        (4, "команды"),
        (5, "команд"),
        (11, "команд"),
        (12, "команд"),
        (21, "команда"),
        (22, "команды"),
        (111, "команд"),
    ],
)
def test_plural_of_commands(n, word):
    assert texts.commands_count(n) == f"{n} {word}"


def test_clip_keeps_short_text_and_cuts_long_text_to_the_limit_with_an_ellipsis():
    assert texts.clip("  two\n lines ", 300) == "two lines"
    clipped = texts.clip("я" * 500, 300)
    assert len(clipped) == 300 and clipped.endswith("…") and clipped[:299] == "я" * 299


# ---------------------------------------------------------------- issues / issue / notes


def test_issues_table_columns_and_summary_at_most_80_characters():
    long = row(key="AURORA-9002", summary="Д" * 120, duedate=None, sprint="", fact_status="")
    text = texts.issues_text([row(), long], limit=50)
    lines = text.splitlines()
    assert lines[1] == "ключ | тема | статус | срок | исполнитель | спринт | статус по факту"
    assert lines[2] == "AURORA-1538 | Починить экспорт | In Progress | 01.12.2026 | jdoe | Спринт 2 | ждёт ревью"
    summary = lines[3].split(" | ")[1]
    assert len(summary) == 80 and summary.endswith("…")
    assert lines[3].endswith("| In Progress | — | jdoe | — | —")


def test_issues_says_when_the_limit_cut_the_list_and_when_nothing_matched():
    assert "показаны первые 1" in texts.issues_text([row()], limit=1)
    assert texts.issues_text([], limit=50) == "задач не найдено"


def card(comments_total=0, comments=(), **kw) -> IssueCard:
    base = {
        "issue": row(),
        "fields": {},
        "description": "",
        "links": (),
        "notes": None,
        "recent_commands": (),
        "comments_total": comments_total,
        "comments": tuple(comments),
    }
    return IssueCard(**(base | kw))


def test_issue_card_shows_links_of_both_sides_with_type_and_direction():
    links = (LinkView("Blocks", "outward", "AURORA-1540", "Релиз"), LinkView("Relates", "inward", "AURORA-7", ""))
    text = texts.issue_text(card(links=links))
    assert "связи (2):" in text
    assert "  Blocks (исходящая) → AURORA-1540 «Релиз»" in text
    assert "  Relates (входящая) ← AURORA-7" in text


def test_issue_card_shows_notes_and_recent_commands():
    notes = NotesView("AURORA-1538", "ждёт ревью", "", "позвонить", "Ольга", T0)
    text = texts.issue_text(card(notes=notes, recent_commands=(command(state="failed", error="Jira 400"),)))
    assert (
        "заметки:\n  статус по факту: ждёт ревью\n  заметка: —\n  следующий шаг: позвонить\n  ответственный: Ольга"
        in text
    )
    assert "последние команды:\n  #40 ensure_fields AURORA-1538 (пакет #9, claude) — failed: Jira 400" in text


def test_issue_card_shows_other_jira_fields_by_name_and_leaves_out_the_shown_ones():
    fields = {
        "summary": "Починить экспорт",
        "status": {"name": "In Progress"},
        "components": [{"name": "api"}, {"name": "ui"}],
        "reporter": {"displayName": "Иван Петров", "name": "ipetrov"},
        "customfield_10010": "Q4",
        "resolution": None,
    }
    lines = texts.issue_text(card(fields=fields, description="Экспорт падает на больших файлах")).splitlines()
    assert lines[5:9] == [
        "components: api, ui",
        "customfield_10010: Q4",
        "reporter: Иван Петров",
        "описание: Экспорт падает на больших файлах",
    ]
    assert not any(line.startswith(("summary:", "status:", "resolution:")) for line in lines)


def test_issue_card_without_comments_notes_links_or_commands():
    text = texts.issue_text(card())
    for line in ("комментариев нет", "заметок нет", "связей нет", "команд по задаче не было"):
        assert line in text.splitlines()


def test_issue_card_seven_comments_newest_first_five_shown_clipped_to_300_and_more_count():
    comments = [
        CommentView(str(i), f"user{i}", T0 + dt.timedelta(hours=i), ("x" * 500) if i == 7 else f"текст {i}")
        for i in range(1, 8)
    ]
    # the five newest handed over oldest first: the renderer still shows the newest first
    text = texts.issue_text(card(comments_total=7, comments=comments[2:]), tz=ZoneInfo("Europe/Moscow"))
    lines = text.splitlines()
    at = lines.index("комментарии (7):")
    shown = lines[at + 1 : at + 6]
    assert shown[0] == "  user7, 30.11.2026 19:00: " + "x" * 299 + "…"
    assert [line.split(",")[0].strip() for line in shown] == ["user7", "user6", "user5", "user4", "user3"]
    assert lines[at + 6] == "  ещё 2"


def test_notes_text_lists_the_updated_notes():
    text = texts.notes_text(NotesView("AURORA-1538", "в работе", "", "", "", T0))
    assert text.splitlines()[0] == "заметки AURORA-1538 обновлены (30.11.2026 09:00):"
    assert "  статус по факту: в работе" in text


# ---------------------------------------------------------------- batches


def test_batch_created_states_id_estimate_in_minutes_and_command_count():
    text = texts.batch_created_text(BatchCreated(id=12, estimate_seconds=95, command_count=4), title="1538 в спринт 2")
    assert text.splitlines()[0] == "пакет #12 «1538 в спринт 2» создан: 4 команды"
    assert "оценка: ~2 мин (estimate_seconds: 95)" in text


def test_batch_status_lists_every_command_state_error_and_remaining_estimate():
    view = batch(
        [
            command(40, "done", result={"key": "AURORA-1538", "created": False, "message": "duedate: → 01.12"}),
            command(41, "failed", type="ensure_link", error="Jira 400: no such link type"),
            command(42, "claimed", type="ensure_sprint", claims=2),
            command(43, "queued", type="refresh", key="AURORA-1538"),
        ]
    )
    text = texts.batch_text(view)
    assert "  #40 ensure_fields AURORA-1538 — done: duedate: → 01.12" in text
    assert "  #41 ensure_link AURORA-1538 — failed: Jira 400: no such link type" in text
    assert "  #42 ensure_sprint AURORA-1538 — claimed, выдач: 2" in text
    assert "  #43 refresh AURORA-1538 — queued" in text
    assert "осталось: ~3 мин" in text


def test_batch_wait_timeout_is_said_and_a_finished_batch_has_its_finish_time():
    assert "ожидание истекло, пакет ещё не завершён" in texts.batch_text(
        batch([command(state="claimed")], timed_out=True)
    )
    done = texts.batch_text(batch([command()], state="done", finished=True, finished_at=T0, estimate_seconds=0))
    assert "завершён: 30.11.2026 09:00" in done and "осталось" not in done


def test_batch_status_names_who_created_the_batch():
    assert texts.batch_text(batch(created_by="olga")).splitlines()[0].endswith("автор: claude, создал: olga")
    assert texts.batch_text(batch()).splitlines()[0].endswith("автор: claude, создал: —")


def test_batches_lists_recent_batches_with_state():
    summary = BatchSummary(9, "1538 в спринт 2", "claude", "done", {"done": 4}, 4, T0, T0, created_by="olga")
    assert texts.batches_text([summary]).splitlines()[1] == (
        "#9 «1538 в спринт 2» — done: 4 команды (done 4), claude (создал: olga), 30.11.2026 09:00"
    )
    ownerless = BatchSummary(9, "t", "api", "done", {"done": 1}, 1, T0, T0)
    assert "api (создал: —)" in texts.batches_text([ownerless])
    assert texts.batches_text([]) == "пакетов нет"


def test_batch_cancel_has_the_exact_line_for_a_claimed_command():
    result = BatchCancelResult(
        batch=batch([command(30, "claimed"), command(31, "cancelled")], state="running"), cancelled=(31,), claimed=(30,)
    )
    text = texts.batch_cancel_text(result)
    assert text.startswith("пакет #9 «1538 в спринт 2» — running")
    assert "отменено: #31" in text
    assert (
        "команда #30 уже у агента и будет выполнена; остановить — `POST /commands/30/cancel` с `force: true`"
        in text.splitlines()
    )


def test_refresh_without_wait_is_a_line_with_the_queued_batch_id():
    assert texts.refresh_queued_text(BatchCreated(id=77, estimate_seconds=5, command_count=1)).startswith(
        "обновление из Jira поставлено: пакет #77"
    )


# ---------------------------------------------------------------- agent status


def test_agent_status_online_with_a_reissued_command():
    text = texts.agent_status_text(
        status(
            reissued=(ReissuedCommand(40, "ensure_fields", 2),),
            rate_limited_24h=3,
            current_command=command(40, "claimed", claims=2),
        )
    )
    lines = text.splitlines()
    assert lines[0] == "агент онлайн (последний контакт: 30.11.2026 09:00)"
    assert "версия: v6" in lines
    assert "текущая команда: #40 ensure_fields AURORA-1538 (выдач: 2)" in lines
    assert "- команда #40 ensure_fields: выдач 2" in lines
    assert "429 за сутки: 3" in lines and "версия настроек: 4" in lines


def test_agent_status_after_a_rollback():
    pub = PublicationView(7, "ab" * 32, 100, "", T0)
    text = texts.agent_status_text(
        status(
            publication=pub,
            update_state="rolled_back",
            update_from=6,
            update_to=7,
            update_error="v7 не вышла на связь",
            update_hint="откат с v7 на v6: v7 не вышла на связь",
        )
    )
    lines = text.splitlines()
    assert "публикация: v7 от 30.11.2026 09:00" in lines
    assert "обновление: rolled_back v6 → v7" in lines
    assert "запускатель: v1" in lines
    assert "откат с v7 на v6: v7 не вышла на связь" in lines


def test_agent_status_right_after_a_hub_restart_does_not_guess_the_launcher():
    text = texts.agent_status_text(status(agent_reported=False, launcher_version=None, online=False))
    assert "запускатель: неизвестно (агент ещё не выходил на связь после перезапуска хаба)" in text.splitlines()
    assert "без запускателя" not in text


def test_agent_status_times_in_the_callers_zone():
    text = texts.agent_status_text(status(), tz=ZoneInfo("Asia/Vladivostok"))
    assert text.splitlines()[0] == "агент онлайн (последний контакт: 30.11.2026 19:00)"


def test_agent_status_without_launcher_publication_or_contact():
    assert "без запускателя" in texts.agent_status_text(status(launcher_version=None)).splitlines()
    assert "публикации нет" in texts.agent_status_text(status()).splitlines()
    never = texts.agent_status_text(status(has_contact=False, online=False, version=None, agent_reported=False))
    assert never.splitlines()[:2] == ["агент офлайн: ещё не выходил на связь", "версия: неизвестна"]
    assert "версия настроек: 4 (у агента: 3)" in texts.agent_status_text(status(agent_settings_version=3))


# ---------------------------------------------------------------- sync log, settings, knowledge


def test_sync_log_lists_runs_with_counts_and_errors():
    run = SyncRunView(5, "incremental", "failed", T0, T0 + dt.timedelta(minutes=2), {"issues": 12}, ("Jira 503",))
    text = texts.sync_log_text([run])
    assert "#5 incremental — failed: 30.11.2026 09:00 → 30.11.2026 09:02; issues 12" in text
    assert "  ошибка: Jira 503" in text
    assert texts.sync_log_text([]) == "синхронизаций ещё не было"


def test_settings_texts():
    assert texts.settings_text({"base_label": "AWPCA", "lease_seconds": 120}, settings_version=4) == (
        'base_label = "AWPCA"\nlease_seconds = 120\nsettings_version: 4'
    )
    assert texts.settings_set_text("lease_seconds", 5).startswith("lease_seconds сохранён; settings_version: 5")


def test_knowledge_text_cites_candidates_and_names_only_coordinates_of_withheld():
    from knowledge.facade import Candidate, Withheld

    candidate = Candidate(3, 30, "Отпуск", "https://wiki/otpusk", "wiki", "Отпуск оформляют за две недели.", 0.5, 1)
    text = texts.knowledge_text([candidate], [Withheld("hr", "user:7")], is_empty=False)
    assert "[1] Отпуск (wiki, запись 3) — https://wiki/otpusk" in text
    assert "    Отпуск оформляют за две недели." in text
    assert "  источник hr, автор user:7" in text
    assert texts.knowledge_text([], [], is_empty=False) == "не нашёл"


def test_other_fields_show_sprint_names_and_local_times_not_raw_strings():
    from hub.mcp.texts import other_fields_lines

    fields = {
        "customfield_10020": [
            "com.atlassian.greenhopper.service.sprint.Sprint@1eef[id=3,rapidViewId=1,state=CLOSED,name=Спринт 0,"
            "startDate=<null>,endDate=<null>,completeDate=<null>,activatedDate=<null>,sequence=3,goal=<null>]",
            "com.atlassian.greenhopper.service.sprint.Sprint@2b1c[id=1,rapidViewId=1,state=ACTIVE,name=Спринт 1,"
            "startDate=2026-11-23T09:00:00.000Z,endDate=<null>,completeDate=<null>,sequence=1,goal=<null>]",
        ],
        "created": "2026-11-30T11:50:30.000+0000",
        "resolutiondate": "2026-12-01T06:05:00.000+0300",
        "customfield_10050": "2026-12-24",
        "customfield_10010": "Платежи",
    }
    lines = other_fields_lines(fields, tz=ZoneInfo("Europe/Moscow"))
    assert lines == [
        "created: 30.11.2026 14:50",
        "customfield_10010: Платежи",
        "customfield_10020: Спринт 0, Спринт 1",
        "customfield_10050: 24.12.2026",
        "resolutiondate: 01.12.2026 06:05",
    ]
