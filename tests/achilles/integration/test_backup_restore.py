"""`manage.py backup` / `manage.py restore` (docs/deployment.md «Backups»): a populated database is
backed up, lost (its schema dropped), restored into the empty database — and every table's rows and
every sequence are as they were, and searches answer the same."""

from __future__ import annotations

import stat
import tarfile

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from achilles import audit
from achilles.models import User
from agents.models import Agent
from agents.services import agent_run_request
from conversations.models import Conversation, Message
from hub import services as hub_services
from knowledge import facade
from tests.processes import database_reconnect

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Tables that must hold rows before the backup, so the comparison is about something.
POPULATED = (
    "users",
    "conversations",
    "messages",
    "agents",
    "agent_runs",
    "knowledge_records",
    "knowledge_chunks",
    "hub_batches",
    "hub_commands",
    "hub_issues",
    "audit_events",
)
QUERIES = ("отпуск", "инцидент дежурный", "AURORA", "бюджет")


def fingerprint() -> tuple[dict[str, tuple[int, str]], dict[str, int | None]]:
    """Per table: (row count, md5 of every row's text in order); per sequence: its last value."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        tables = [row[0] for row in cursor.fetchall()]
        rows = {}
        for table in tables:
            cursor.execute(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM \"{table}\" t"
            )
            rows[table] = cursor.fetchone()
        cursor.execute("SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public'")
        sequences = dict(cursor.fetchall())
    return rows, sequences


def searches() -> dict:
    out = {}
    for username in ("admin", "demo"):
        identity = facade.Identity.for_user(User.objects.get(username=username))
        for query in QUERIES:
            result = facade.search(query, identity)
            out[username, query] = [(c.record_id, c.chunk_id, c.title) for c in result.candidates]
    return out


def populate() -> None:
    call_command("demo_data")  # accounts, models, knowledge with ACLs, agents, the hub's mirror and notes
    admin, demo = User.objects.get(username="admin"), User.objects.get(username="demo")
    conversation = Conversation.objects.create(user=demo, title="Отпуск")
    Message.objects.create(conversation=conversation, role="user", content="Сколько дней отпуска?")
    Message.objects.create(conversation=conversation, role="assistant", content="28 дней [1]", tokens_used=7)
    agent_run_request(agent=Agent.objects.order_by("id").first())
    hub_services.batch_create(
        user=admin, title="Комментарии", commands=[{"type": "ensure_comment", "key": "AURORA-9001", "body": "x"}]
    )
    audit.audit_record(actor=admin, action=audit.SIGNIN_FAILED, target="user:nobody", details={"ip": "10.0.0.1"})


def test_a_backup_restored_into_an_empty_database_has_every_row_and_the_same_searches(tmp_path, monkeypatch):
    # given a populated database, and configuration that lives outside it
    monkeypatch.setenv("ACHILLES_SECRET_KEY_CONNECTORS", "the-connectors-key")
    populate()
    found = searches()  # first: a search may write to the audit trail (a withheld hint)
    assert any(found.values())
    rows, sequences = fingerprint()
    empty = [table for table in POPULATED if rows[table][0] == 0]
    assert not empty, f"nothing to compare in {empty}"

    # when it is backed up
    archive = tmp_path / "achilles.tar"
    call_command("backup", str(archive))
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600  # it holds the secrets
    with tarfile.open(archive) as tar:
        assert set(tar.getnames()) == {"manifest.json", "config.env", "database.dump"}
        assert "ACHILLES_SECRET_KEY_CONNECTORS=the-connectors-key" in tar.extractfile("config.env").read().decode()
    # a restore over a database that has tables is refused
    with pytest.raises(CommandError, match="restore into an empty database"):
        call_command("restore", str(archive))

    # and the database is lost, then restored into the empty database (vector created, as installed)
    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public; CREATE EXTENSION vector")
    database_reconnect()
    call_command("restore", str(archive))
    database_reconnect()  # the pool's sessions prepared statements against the dropped tables

    # then every row, every sequence and every search is as it was
    after_rows, after_sequences = fingerprint()
    assert after_rows == rows
    assert after_sequences == sequences
    assert searches() == found
