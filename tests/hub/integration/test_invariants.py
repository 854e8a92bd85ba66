"""Every database invariant of the hub, broken with raw SQL: the database refuses, not the code."""

import hashlib

import pytest
from django.db import IntegrityError, connection, transaction

from hub.models import Batch, Command, HubState, MirrorIssue, Publication
from tests.hub.conftest import issue_payload

pytestmark = pytest.mark.django_db


def _refused(sql: str, params=(), name: str | tuple | None = None) -> None:
    """The statement fails with an integrity error naming one of ``name`` (several CHECKs may apply)."""
    with pytest.raises(IntegrityError) as exc, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    if name:
        names = (name,) if isinstance(name, str) else name
        assert any(n in str(exc.value) for n in names), str(exc.value)


@pytest.fixture
def command(db):
    batch = Batch.objects.create(title="t", author="api")
    return Command.objects.create(
        batch=batch,
        seq=1,
        type="ensure_comment",
        payload={"type": "ensure_comment", "key": "A-1", "body": "x"},
        keys=["A-1"],
    )


def test_command_states_and_types_are_closed_sets(command):
    _refused(
        "UPDATE hub_commands SET state = 'running' WHERE id = %s",
        [command.id],
        ("hub_command_state_valid", "hub_command_finished_iff_final"),
    )
    _refused(
        "UPDATE hub_commands SET type = 'ensure_magic', payload = '{\"type\": \"ensure_magic\"}' WHERE id = %s",
        [command.id],
        "hub_command_type_valid",
    )
    _refused(
        'UPDATE hub_commands SET payload = \'{"type": "refresh"}\' WHERE id = %s',
        [command.id],
        "hub_command_payload_type_matches",
    )


def test_a_claimed_command_holds_exactly_one_live_lease(command):
    _refused("UPDATE hub_commands SET state = 'claimed' WHERE id = %s", [command.id], "hub_command_lease_iff_claimed")
    _refused(
        "UPDATE hub_commands SET lease_token = 'x', lease_expires_at = now() WHERE id = %s",
        [command.id],
        "hub_command_lease_iff_claimed",
    )
    # claims must count the issued leases, and the live one must be the newest.
    _refused(
        "UPDATE hub_commands SET state = 'claimed', claims = 2, lease_token = 'a', lease_tokens = '{a}', "
        "lease_expires_at = now(), claimed_at = now() WHERE id = %s",
        [command.id],
        "hub_command_claims_match_leases",
    )
    _refused(
        "UPDATE hub_commands SET state = 'claimed', claims = 2, lease_token = 'a', lease_tokens = '{a,b}', "
        "lease_expires_at = now(), claimed_at = now() WHERE id = %s",
        [command.id],
        "hub_command_live_lease_is_newest",
    )
    with connection.cursor() as cursor:  # the consistent version is accepted
        cursor.execute(
            "UPDATE hub_commands SET state = 'claimed', claims = 1, lease_token = 'a', lease_tokens = '{a}', "
            "lease_expires_at = now(), claimed_at = now() WHERE id = %s",
            [command.id],
        )
    _refused(
        "UPDATE hub_commands SET state = 'done', result = '{}', finished_at = now() WHERE id = %s",
        [command.id],
        "hub_command_lease_iff_claimed",
    )


def test_final_states_carry_their_evidence(command):
    _refused(
        "UPDATE hub_commands SET state = 'done', result = '{}' WHERE id = %s",
        [command.id],
        "hub_command_finished_iff_final",
    )
    _refused(
        "UPDATE hub_commands SET state = 'done', finished_at = now() WHERE id = %s",
        [command.id],
        "hub_command_done_has_result",
    )
    _refused(
        "UPDATE hub_commands SET state = 'failed', finished_at = now() WHERE id = %s",
        [command.id],
        "hub_command_failed_has_error",
    )
    _refused(
        "UPDATE hub_commands SET finished_at = now() WHERE id = %s", [command.id], "hub_command_finished_iff_final"
    )
    _refused(
        "UPDATE hub_commands SET force_cancelled = true WHERE id = %s", [command.id], "hub_command_forced_is_cancelled"
    )
    _refused(
        "UPDATE hub_commands SET state = 'cancelled', finished_at = now(), cancel_notified_at = now() WHERE id = %s",
        [command.id],
        "hub_command_notified_only_if_forced",
    )
    _refused(
        "UPDATE hub_commands SET state = 'failed', error = 'e', finished_at = now(), finished_lease_token = 'zz' "
        "WHERE id = %s",
        [command.id],
        "hub_command_finished_lease_was_issued",
    )


def test_seq_is_unique_per_batch_and_dependencies_point_backwards(command):
    _refused(
        "INSERT INTO hub_commands (batch_id, seq, type, payload, keys, depends_on, waits_for_batch, state, claims, "
        "lease_tokens, error, created_key, force_cancelled) VALUES (%s, 1, 'refresh', '{\"type\": \"refresh\"}', "
        "'{}', '{}', false, 'queued', 0, '{}', '', '', false)",
        [command.batch_id],
        "hub_command_seq_unique_per_batch",
    )
    _refused("UPDATE hub_commands SET depends_on = '{1}' WHERE id = %s", [command.id], "hub_command_depends_on_earlier")
    _refused("UPDATE hub_commands SET seq = 0 WHERE id = %s", [command.id], "hub_command_seq_positive")


def test_deleting_a_batch_cascades_to_its_commands(command):
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM hub_batches WHERE id = %s", [command.batch_id])
    assert not Command.objects.filter(pk=command.pk).exists()


def test_batch_title_and_author(command):
    _refused("UPDATE hub_batches SET title = '' WHERE id = %s", [command.batch_id], "hub_batch_title_not_empty")
    _refused(
        "UPDATE hub_batches SET author = 'Robert Tables' WHERE id = %s", [command.batch_id], "hub_batch_author_format"
    )


def test_the_mirror_never_goes_back_to_an_older_version(mirror):
    mirror(
        issue_payload(
            "AURORA-1",
            updated="2026-11-30T12:00:00.000+0000",
            links=[{"link_type": "Blocks", "direction": "outward", "other_key": "AURORA-2"}],
            comments=[{"id": "1", "author": "a", "created": "2026-11-30T10:00:00.000+0000", "body": "b"}],
        )
    )
    issue = MirrorIssue.objects.get(key="AURORA-1")
    _refused(
        "UPDATE hub_issues SET updated = updated - interval '1 minute' WHERE id = %s",
        [issue.id],
        "is older than the mirrored",
    )
    _refused("UPDATE hub_issues SET key = 'BOREAS-1' WHERE id = %s", [issue.id], "hub_mirrorissue_key_in_project")
    _refused("UPDATE hub_issues SET key = 'aurora1', project = 'aurora' WHERE id = %s", [issue.id])
    _refused(
        "UPDATE hub_issue_links SET direction = 'up' WHERE issue_id = %s", [issue.id], "hub_mirrorlink_direction_valid"
    )
    _refused(
        "INSERT INTO hub_issue_comments (issue_id, jira_id, author, body) VALUES (%s, '1', 'x', 'dup')",
        [issue.id],
        "hub_mirrorcomment_unique",
    )
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM hub_issues WHERE id = %s", [issue.id])
        cursor.execute("SELECT count(*) FROM hub_issue_links WHERE issue_id = %s", [issue.id])
        assert cursor.fetchone()[0] == 0


def test_a_publications_digest_is_its_bytes_digest(db):
    data = b"artifact"
    publication = Publication.objects.create(
        version=1, artifact=data, sha256=hashlib.sha256(data).hexdigest(), size=len(data)
    )
    _refused(
        "UPDATE hub_publications SET artifact = 'other' WHERE id = %s",
        [publication.id],
        "hub_publication_sha256_matches",
    )
    _refused("UPDATE hub_publications SET size = 3 WHERE id = %s", [publication.id], "hub_publication_size_matches")
    _refused(
        "INSERT INTO hub_publications (version, artifact, sha256, size, notes) VALUES (1, 'x', "
        "encode(sha256('x'), 'hex'), 1, '')",
        (),
        "version",
    )


def test_settings_version_only_grows_and_the_state_row_stays(db):
    version = HubState.objects.get(pk=1).settings_version
    _refused("UPDATE hub_state SET settings_version = %s WHERE id = 1", [version], "settings_version must grow")
    _refused("UPDATE hub_state SET settings_version = settings_version - 1 WHERE id = 1", (), None)
    _refused("DELETE FROM hub_state", (), "cannot be deleted")
    _refused("INSERT INTO hub_state (id, settings_version) VALUES (2, 1)", (), "hub_hubstate_singleton")
    _refused("INSERT INTO hub_settings (key, value) VALUES ('colour', '\"red\"')", (), "hub_hubsetting_key_known")


def test_sync_agent_contact_and_runs(sync_agent):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO hub_sync_agent_contacts (sync_agent_id, last_contact_at, last_claim_at, version, "
            "update_error) VALUES (%s, now(), now(), 6, '')",
            [sync_agent.id],
        )
        cursor.execute(
            "INSERT INTO hub_sync_runs (sync_agent_id, kind, status, counts, errors) VALUES (%s, 'full', 'running', "
            "'{}', '[]') RETURNING id",
            [sync_agent.id],
        )
        run_id = cursor.fetchone()[0]
    _refused("UPDATE hub_sync_agent_contacts SET version = 0", (), "hub_syncagentcontact_version_positive")
    _refused(
        "UPDATE hub_sync_agent_contacts SET update_state = 'exploded'", (), "hub_syncagentcontact_update_state_valid"
    )
    _refused(
        "UPDATE hub_sync_agent_contacts SET update_from = 6, update_to = 7",
        (),
        "hub_syncagentcontact_update_versions_need_state",
    )
    _refused("UPDATE hub_sync_runs SET status = 'ok' WHERE id = %s", [run_id], "hub_syncrun_finished_iff_not_running")
    _refused("UPDATE hub_sync_runs SET kind = 'partial' WHERE id = %s", [run_id], "hub_syncrun_kind_valid")
    _refused(
        "UPDATE hub_sync_agents SET token_hash = 'plain' WHERE id = %s", [sync_agent.id], "hub_syncagent_token_hash_hex"
    )
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM hub_sync_agents WHERE id = %s", [sync_agent.id])
        cursor.execute("SELECT sync_agent_id FROM hub_sync_runs WHERE id = %s", [run_id])
        assert cursor.fetchone()[0] is None
        cursor.execute("SELECT count(*) FROM hub_sync_agent_contacts")
        assert cursor.fetchone()[0] == 0
