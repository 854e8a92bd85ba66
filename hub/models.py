"""Tables of the hub (SPEC §6): the Jira mirror, notes, command batches, sync agents, publications,
settings.

The invariants live in the database (migrations 0001/0002): command states and leases by CHECK,
seq unique per batch, `$N` dependencies only on earlier commands, one token per issued lease,
a mirror row never moved back to an older Jira ``updated`` (trigger), a publication's sha256 equal
to its bytes' digest, a monotonic ``settings_version`` (trigger), FK actions ON DELETE at DB level.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now, Upper

from achilles.models import User
from syncagent.command_types import COMMAND_TYPES

KEY_RE = r"^[A-Z][A-Z0-9_]*-[0-9]+$"
PROJECT_RE = r"^[A-Z][A-Z0-9_]*$"
COMMAND_STATES = ("queued", "claimed", "done", "failed", "cancelled")
UPDATE_STATES = ("idle", "downloading", "starting", "done", "rolled_back", "failed")
SYNC_RUN_KINDS = ("incremental", "full", "refresh")
SYNC_RUN_STATUSES = ("running", "ok", "failed")
LINK_DIRECTIONS = ("outward", "inward")


class MirrorIssue(models.Model):
    """A Jira issue as the sync agent last uploaded it (HUB-1); written only by uploads."""

    key = models.CharField(max_length=64, unique=True)
    project = models.CharField(max_length=32)
    summary = models.TextField(default="", blank=True)
    status = models.CharField(max_length=100, default="", blank=True)
    issue_type = models.CharField(max_length=100, default="", blank=True)
    priority = models.CharField(max_length=100, default="", blank=True)
    assignee = models.CharField(max_length=200, default="", blank=True)
    duedate = models.DateField(null=True, blank=True)
    sprint = models.CharField(max_length=200, default="", blank=True)
    labels = ArrayField(models.CharField(max_length=255), default=list, blank=True)
    description = models.TextField(default="", blank=True)
    fields = models.JSONField(default=dict, blank=True, help_text="Raw Jira fields as uploaded.")
    updated = models.DateTimeField(help_text="Jira's `updated` of the uploaded version.")
    content_sha256 = models.CharField(max_length=64, help_text="Digest of the uploaded page entry: equal → unchanged.")
    mirrored_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "hub_issues"
        ordering = ["key"]
        permissions = [("use_hub", "Can use the hub (mirror, notes, batches)")]
        indexes = [
            # HUB-3 filters compare case-insensitively (UPPER(col) = UPPER(value)): the indexes are on
            # the same expressions, so PostgreSQL can combine them (bitmap AND) for any mix of filters.
            models.Index(fields=["project", "updated"], name="hub_issue_project_updated_idx"),
            models.Index(Upper("status"), name="hub_issue_status_idx"),
            models.Index(Upper("assignee"), name="hub_issue_assignee_idx"),
            models.Index(Upper("sprint"), name="hub_issue_sprint_idx"),
            GinIndex(fields=["labels"], name="hub_issue_labels_idx"),
            models.Index(fields=["project", "duedate"], name="hub_issue_project_duedate_idx"),
            models.Index(fields=["duedate"], name="hub_issue_duedate_idx"),
            models.Index(fields=["updated"], name="hub_issue_updated_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(key__regex=KEY_RE),
                name="hub_mirrorissue_key_format",
                violation_error_message="A Jira key looks like PROJ-123.",
            ),
            models.CheckConstraint(condition=Q(project__regex=PROJECT_RE), name="hub_mirrorissue_project_format"),
            models.CheckConstraint(
                condition=Q(content_sha256__regex=r"^[0-9a-f]{64}$"), name="hub_mirrorissue_sha256_hex"
            ),
        ]

    def __str__(self) -> str:
        return self.key


class MirrorLink(models.Model):
    """An issue link as Jira shows it on ``issue`` (HUB-1); replaced with every upload of the issue."""

    issue = models.ForeignKey(MirrorIssue, on_delete=models.DO_NOTHING, related_name="links")
    link_type = models.CharField(max_length=100)
    direction = models.CharField(max_length=8)
    other_key = models.CharField(max_length=64)

    class Meta:
        db_table = "hub_issue_links"
        indexes = [models.Index(fields=["other_key"], name="hub_link_other_key_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["issue", "link_type", "direction", "other_key"], name="hub_mirrorlink_unique"
            ),
            models.CheckConstraint(condition=Q(direction__in=LINK_DIRECTIONS), name="hub_mirrorlink_direction_valid"),
            models.CheckConstraint(condition=Q(other_key__regex=KEY_RE), name="hub_mirrorlink_other_key_format"),
            models.CheckConstraint(condition=~Q(link_type=""), name="hub_mirrorlink_type_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.link_type} {self.direction} {self.other_key}"


class MirrorComment(models.Model):
    """A Jira comment of a mirrored issue (HUB-1); replaced with every upload of the issue."""

    issue = models.ForeignKey(MirrorIssue, on_delete=models.DO_NOTHING, related_name="comments")
    jira_id = models.CharField(max_length=64)
    author = models.CharField(max_length=200, default="", blank=True)
    created = models.DateTimeField(null=True, blank=True)
    body = models.TextField(default="", blank=True)

    class Meta:
        db_table = "hub_issue_comments"
        indexes = [models.Index(fields=["issue", "created"], name="hub_comment_issue_created_idx")]
        constraints = [
            models.UniqueConstraint(fields=["issue", "jira_id"], name="hub_mirrorcomment_unique"),
            models.CheckConstraint(condition=~Q(jira_id=""), name="hub_mirrorcomment_jira_id_not_empty"),
        ]

    def __str__(self) -> str:
        return f"comment {self.jira_id}"


class IssueNote(models.Model):
    """Hub-local notes of an issue (HUB-2), never sent to Jira."""

    issue = models.OneToOneField(MirrorIssue, on_delete=models.DO_NOTHING, related_name="notes")
    fact_status = models.CharField(max_length=200, default="", blank=True)
    note = models.TextField(default="", blank=True)
    next_step = models.TextField(default="", blank=True)
    owner = models.CharField(max_length=200, default="", blank=True)
    updated_by = models.ForeignKey(User, on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+")
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "hub_notes"
        indexes = [models.Index(Upper("fact_status"), name="hub_note_fact_status_idx")]

    def __str__(self) -> str:
        return f"notes of issue {self.issue_id}"


class Batch(models.Model):
    """A titled group of commands created at once (HUB-6); finished when every command is final."""

    title = models.CharField(max_length=300)
    author = models.CharField(max_length=64, help_text="`claude` from MCP, `api` from REST without author.")
    # Who created it (REST, MCP, admin): ON DELETE SET NULL in the database (migration 0002) — deleting
    # a person keeps their batches (and the audit trail keeps their name); an ownerless batch is then
    # visible only to staff and holders of hub.view_batch / hub.manage_any_batch.
    created_by = models.ForeignKey(
        User,
        on_delete=models.DO_NOTHING,
        null=True,
        blank=True,
        related_name="hub_batches",
        help_text="The person who created the batch; empty once that user is deleted.",
    )
    created_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    retry_of = models.ForeignKey("Command", on_delete=models.DO_NOTHING, null=True, blank=True, related_name="retries")

    class Meta:
        db_table = "hub_batches"
        ordering = ["-id"]
        permissions = [
            ("manage_any_batch", "Can cancel, force-cancel and retry anyone's hub batches and commands"),
            ("name_batch_author", "Can name the author of a hub batch (service accounts)"),
        ]
        # A person's own batches, newest first (the list a non-staff user gets).
        indexes = [models.Index(fields=["created_by", "-id"], name="hub_batch_created_by_idx")]
        constraints = [
            models.CheckConstraint(condition=~Q(title=""), name="hub_batch_title_not_empty"),
            models.CheckConstraint(condition=Q(author__regex=r"^[a-z0-9_.@-]{1,64}$"), name="hub_batch_author_format"),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True) | Q(finished_at__gte=models.F("created_at")),
                name="hub_batch_finished_after_created",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.title}"


class Command(models.Model):
    """One idempotent command of a batch (HUB-5/7): queued → claimed (lease) → done | failed,
    queued | claimed (forced) → cancelled."""

    batch = models.ForeignKey(Batch, on_delete=models.DO_NOTHING, related_name="commands")
    seq = models.PositiveIntegerField(help_text="1-based position in the batch; `$N` names seq N.")
    type = models.CharField(max_length=32)
    payload = models.JSONField(help_text="The command as validated (the contract's shape).")
    keys = ArrayField(
        models.CharField(max_length=64),
        default=list,
        blank=True,
        help_text="Issue keys the command touches (`$N` until resolved).",
    )
    depends_on = ArrayField(
        models.PositiveIntegerField(),
        default=list,
        blank=True,
        help_text="Seqs of earlier ensure_issue commands this one names as `$N`.",
    )
    waits_for_batch = models.BooleanField(default=False, help_text="Issued only after every other command is final.")
    state = models.CharField(max_length=16, default="queued")
    claims = models.PositiveIntegerField(default=0)
    lease_token = models.CharField(max_length=64, null=True, blank=True)
    lease_tokens = ArrayField(
        models.CharField(max_length=64),
        default=list,
        blank=True,
        help_text="Every lease ever issued for this command, oldest first.",
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.ForeignKey("SyncAgent", on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+")
    finished_at = models.DateTimeField(null=True, blank=True)
    finished_lease_token = models.CharField(max_length=64, null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(default="", blank=True)
    created_key = models.CharField(max_length=64, default="", blank=True)
    force_cancelled = models.BooleanField(default=False)
    cancel_notified_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "hub_commands"
        ordering = ["batch_id", "seq"]
        indexes = [
            # The claim scan reads only open commands, in batch order.
            models.Index(
                fields=["batch", "seq"], name="hub_command_open_idx", condition=Q(state__in=["queued", "claimed"])
            ),
            models.Index(fields=["lease_expires_at"], name="hub_command_lease_idx", condition=Q(state="claimed")),
            models.Index(
                fields=["claimed_by"],
                name="hub_command_cancel_notify_idx",
                condition=Q(force_cancelled=True, cancel_notified_at__isnull=True),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["batch", "seq"], name="hub_command_seq_unique_per_batch"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="hub_command_seq_positive"),
            models.CheckConstraint(condition=Q(type__in=COMMAND_TYPES), name="hub_command_type_valid"),
            models.CheckConstraint(condition=Q(state__in=COMMAND_STATES), name="hub_command_state_valid"),
            # A claimed command holds exactly one live lease; no other state holds one.
            models.CheckConstraint(
                condition=(
                    Q(
                        state="claimed",
                        lease_token__isnull=False,
                        lease_expires_at__isnull=False,
                        claimed_at__isnull=False,
                        claims__gte=1,
                    )
                    | (~Q(state="claimed") & Q(lease_token__isnull=True, lease_expires_at__isnull=True))
                ),
                name="hub_command_lease_iff_claimed",
            ),
            models.CheckConstraint(
                condition=(
                    Q(state__in=["done", "failed", "cancelled"], finished_at__isnull=False)
                    | Q(state__in=["queued", "claimed"], finished_at__isnull=True)
                ),
                name="hub_command_finished_iff_final",
            ),
            models.CheckConstraint(
                condition=~Q(state="done") | Q(result__isnull=False), name="hub_command_done_has_result"
            ),
            models.CheckConstraint(condition=~Q(state="failed") | ~Q(error=""), name="hub_command_failed_has_error"),
            models.CheckConstraint(
                condition=~Q(force_cancelled=True) | Q(state="cancelled"), name="hub_command_forced_is_cancelled"
            ),
            models.CheckConstraint(
                condition=Q(cancel_notified_at__isnull=True) | Q(force_cancelled=True),
                name="hub_command_notified_only_if_forced",
            ),
            # claims counts the leases issued; the live lease is the newest one.
            models.CheckConstraint(
                condition=Q(claims=models.Func(models.F("lease_tokens"), function="cardinality")),
                name="hub_command_claims_match_leases",
            ),
            models.CheckConstraint(
                condition=Q(finished_lease_token__isnull=True) | Q(state__in=["done", "failed"]),
                name="hub_command_finished_lease_only_when_reported",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.type}"


class SyncAgent(models.Model):
    """An on-prem sync agent: its own token scope (``achsync_…``), usable only on the protocol routes."""

    name = models.CharField(max_length=100, unique=True)
    token_prefix = models.CharField(max_length=16)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(db_default=Now())
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "hub_sync_agents"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(name__regex=r"^[A-Za-z0-9_.-]{1,100}$"), name="hub_syncagent_name_format"
            ),
            models.CheckConstraint(
                condition=Q(token_hash__regex=r"^[0-9a-f]{64}$"), name="hub_syncagent_token_hash_hex"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class SyncAgentContact(models.Model):
    """What a sync agent said on its latest claim (HUB-11/12): versions, update state, contact times."""

    sync_agent = models.OneToOneField(SyncAgent, on_delete=models.DO_NOTHING, primary_key=True, related_name="contact")
    last_contact_at = models.DateTimeField()
    last_claim_at = models.DateTimeField()
    version = models.PositiveIntegerField()
    launcher_version = models.PositiveIntegerField(null=True, blank=True, help_text="NULL: runs without the launcher.")
    settings_version = models.PositiveIntegerField(null=True, blank=True)
    update_state = models.CharField(max_length=16, null=True, blank=True)
    update_from = models.PositiveIntegerField(null=True, blank=True)
    update_to = models.PositiveIntegerField(null=True, blank=True)
    update_error = models.TextField(default="", blank=True)

    class Meta:
        db_table = "hub_sync_agent_contacts"
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="hub_syncagentcontact_version_positive"),
            models.CheckConstraint(
                condition=Q(launcher_version__isnull=True) | Q(launcher_version__gte=1),
                name="hub_syncagentcontact_launcher_version_positive",
            ),
            models.CheckConstraint(
                condition=Q(update_state__isnull=True) | Q(update_state__in=UPDATE_STATES),
                name="hub_syncagentcontact_update_state_valid",
            ),
            models.CheckConstraint(
                condition=~Q(update_state__isnull=True) | (Q(update_from__isnull=True) & Q(update_to__isnull=True)),
                name="hub_syncagentcontact_update_versions_need_state",
            ),
        ]

    def __str__(self) -> str:
        return f"contact of sync agent {self.sync_agent_id}"


class RateLimitEvent(models.Model):
    """A 429 Jira answered the sync agent (HUB-12 «429 за сутки»)."""

    sync_agent = models.ForeignKey(SyncAgent, on_delete=models.DO_NOTHING, related_name="+")
    at = models.DateTimeField()
    retry_after_seconds = models.FloatField(default=0)
    path = models.CharField(max_length=500, default="", blank=True)

    class Meta:
        db_table = "hub_rate_limit_events"
        indexes = [models.Index(fields=["at"], name="hub_ratelimit_at_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(retry_after_seconds__gte=0), name="hub_ratelimitevent_retry_after_nonnegative"
            ),
            models.UniqueConstraint(fields=["sync_agent", "at", "path"], name="hub_ratelimitevent_unique"),
        ]

    def __str__(self) -> str:
        return f"429 at {self.at:%Y-%m-%d %H:%M:%S}"


class SyncRun(models.Model):
    """One mirror sync the sync agent ran (HUB-14)."""

    sync_agent = models.ForeignKey(SyncAgent, on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+")
    kind = models.CharField(max_length=16)
    status = models.CharField(max_length=16, default="running")
    started_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)

    class Meta:
        db_table = "hub_sync_runs"
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=SYNC_RUN_KINDS), name="hub_syncrun_kind_valid"),
            models.CheckConstraint(condition=Q(status__in=SYNC_RUN_STATUSES), name="hub_syncrun_status_valid"),
            models.CheckConstraint(
                condition=(
                    Q(status="running", finished_at__isnull=True)
                    | (~Q(status="running") & Q(finished_at__isnull=False))
                ),
                name="hub_syncrun_finished_iff_not_running",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.kind} {self.status}"


class Publication(models.Model):
    """A published sync-agent version (HUB-13): the artifact's bytes and their sha256."""

    version = models.PositiveIntegerField(unique=True)
    artifact = models.BinaryField()
    sha256 = models.CharField(max_length=64)
    size = models.PositiveIntegerField()
    notes = models.TextField(default="", blank=True)
    published_at = models.DateTimeField(db_default=Now())
    published_by = models.ForeignKey(User, on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+")

    class Meta:
        db_table = "hub_publications"
        ordering = ["-version"]
        constraints = [
            models.CheckConstraint(condition=Q(version__gte=1), name="hub_publication_version_positive"),
        ]

    def __str__(self) -> str:
        return f"v{self.version}"


class HubSetting(models.Model):
    """One hub setting (HUB-15); validated per key by ``hub.settings_schema``."""

    key = models.CharField(max_length=64, primary_key=True)
    value = models.JSONField()
    updated_at = models.DateTimeField(db_default=Now())
    updated_by = models.ForeignKey(User, on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+")

    class Meta:
        db_table = "hub_settings"
        ordering = ["key"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    key__in=[
                        "base_label",
                        "poll_interval_seconds",
                        "lease_seconds",
                        "full_sync_cron",
                        "projects",
                        "project_acl",
                        "sync_overlap_minutes",
                        "page_size",
                    ]
                ),
                name="hub_hubsetting_key_known",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class HubState(models.Model):
    """The hub's singleton row: the monotonic ``settings_version`` (trigger refuses a decrease)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    settings_version = models.PositiveIntegerField(default=1)

    class Meta:
        db_table = "hub_state"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="hub_hubstate_singleton"),
            models.CheckConstraint(condition=Q(settings_version__gte=1), name="hub_hubstate_settings_version_positive"),
        ]

    def __str__(self) -> str:
        return f"hub state (settings v{self.settings_version})"
