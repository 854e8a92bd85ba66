"""Tables of the Knowledge Store (SPEC KS-1): records, chunks, links, access signals, uploads.

Other apps never read these tables; they go through ``knowledge.facade``. Invariants the
database holds itself (see ``migrations/0002_database_invariants.py``): the chunk's ``acl`` is a
copy of its record's (and ``acl_also`` of its clauses), kept by triggers; FKs cascade in the DB; row-level security for the
``achilles_ks_reader`` role that runs ``sql()``.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import F, Func, Q
from django.db.models.functions import Now
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from pgvector.django import HnswIndex, VectorField

from achilles.models import TimestampedModel
from knowledge.choices import DOCUMENT_STATES_WITH_ERROR, DocumentState
from knowledge.contracts import ACCESS_KINDS

EMBEDDING_DIM = 384
# One text-search configuration for the whole store (why: knowledge/README.md). PostgreSQL's
# `russian` config stems Cyrillic words with the Russian Snowball stemmer and ASCII words with
# the English one, so one tsvector serves a mixed corpus.
TEXT_SEARCH_CONFIG = "russian"


# A record's url: empty or an absolute http(s) address (the services check it, a CHECK holds it).
RECORD_URL_PATTERN = r"^https?://[^\s/?#]+[^\s]*$"


# acl_also is NULL (no clause) or a non-empty array of non-empty arrays of principals (0013's function)
ACL_ALSO_VALID = Q(acl_also__isnull=True) | Q(
    Func("acl_also", function="knowledge_acl_clauses_valid", output_field=models.BooleanField())
)


class Record(TimestampedModel):
    """A source document (a file, a Confluence page, a Jira issue) under one ACL."""

    source_system = models.CharField(_("система-источник"), max_length=64)
    external_id = models.CharField(_("внешний ID"), max_length=512)
    title = models.CharField(_("заголовок"), max_length=500)
    url = models.CharField(_("адрес"), max_length=2000, blank=True, default="")
    author_principal_id = models.CharField(_("автор (принципал)"), max_length=200, null=True, blank=True)
    acl = ArrayField(
        models.TextField(),
        verbose_name=_("доступ (ACL)"),
        default=list,
        help_text=_(
            "Кто может читать запись: <code>user:&lt;id&gt;</code>, <code>group:&lt;имя&gt;</code>, <code>everyone</code>, <code>public</code>."
        ),
    )
    # «all of» access (migration 0013): further any-of lists; a reader matches ``acl`` and each one
    acl_also = models.JSONField(
        _("дополнительные условия доступа"),
        null=True,
        blank=True,
        default=None,
        help_text=_(
            "Дополнительные списки принципалов (условия «любой из»): читатель должен подходить под ACL и под каждое условие. Пусто — условий нет."
        ),
    )
    trust_score = models.FloatField(_("доверие"), default=1.0)
    origin = models.CharField(
        _("откуда"),
        max_length=600,
        blank=True,
        default="",
        help_text=_(
            "Кто записал: <code>ingest:&lt;папка&gt;</code> или <code>api</code>; <code>--prune</code> трогает только своё."
        ),
    )
    content_hash = models.CharField(_("хеш содержимого"), max_length=64, blank=True, default="")
    embedding_model = models.CharField(
        _("модель эмбеддингов"),
        max_length=100,
        null=True,
        blank=True,
        help_text=_("Модель, которой получены эмбеддинги фрагментов (пусто — только лексический поиск)."),
    )
    content_changed_at = models.DateTimeField(_("содержимое изменено"), db_default=Now())
    last_accessed_at = models.DateTimeField(_("последнее обращение"), null=True, blank=True)
    never_hint = models.BooleanField(
        _("никогда не упоминать в подсказках"),
        default=False,
        db_default=False,
        help_text=_("Никогда не упоминать запись в подсказке о скрытом, как бы она ни подходила."),
    )
    # Withheld decides on words common in records people could not have planted (README § Withheld
    # policy): a Jira issue, an upload, a wiki page anyone edits never count. True unless the writer
    # says otherwise (the safe side): only an admin's folder ingest and the staff REST upsert do.
    user_writable = models.BooleanField(
        _("пишут не только администраторы"),
        default=True,
        db_default=True,
        help_text=_(
            "Это содержимое пишут не только администраторы (задача Jira, загруженный файл, открытое пространство вики): при решении о подсказках о скрытом оно не считается свидетельством того, что слово общеупотребительное."
        ),
    )

    class Meta:
        db_table = "knowledge_records"
        ordering = ["source_system", "external_id"]
        permissions = [("search_as_user", "Can search as another user (preview what they would get)")]
        constraints = [
            models.UniqueConstraint(
                fields=["source_system", "external_id"],
                name="knowledge_record_source_external_unique",
                violation_error_message="A record with this source system and external id exists.",
            ),
            models.CheckConstraint(condition=~Q(source_system=""), name="knowledge_record_source_not_empty"),
            models.CheckConstraint(condition=~Q(external_id=""), name="knowledge_record_external_id_not_empty"),
            models.CheckConstraint(
                condition=Q(trust_score__gte=0.0, trust_score__lte=1.0), name="knowledge_record_trust_score_range"
            ),
            # Citations link to it: only web addresses, never javascript: or data: (see services).
            models.CheckConstraint(
                condition=Q(url="") | Q(url__iregex=RECORD_URL_PATTERN), name="knowledge_record_url_http"
            ),
            models.CheckConstraint(
                condition=ACL_ALSO_VALID,
                name="knowledge_record_acl_also_valid",
                violation_error_message="Each clause of acl_also names at least one principal.",
            ),
        ]
        indexes = [
            GinIndex(fields=["acl"], name="knowledge_record_acl_gin"),
            models.Index(fields=["origin"], name="knowledge_record_origin_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.source_system}:{self.external_id} — {self.title}"


class SourcePolicy(TimestampedModel):
    """How the store treats one source system; ``never_hint``: its records are never withheld hints."""

    source_system = models.CharField(_("система-источник"), max_length=64, unique=True)
    never_hint = models.BooleanField(
        _("никогда не упоминать в подсказках"),
        default=False,
        db_default=False,
        help_text=_("Закрытый источник: никогда не упоминать его в подсказке о скрытом."),
    )
    display_label = models.CharField(
        _("название для людей"),
        max_length=100,
        blank=True,
        default="",
        db_default="",
        help_text=_(
            "Как источник называется в подсказках и на страницах («Файлы», «Confluence», «Jira»); пусто — название по умолчанию."
        ),
    )

    class Meta:
        db_table = "knowledge_source_policies"
        ordering = ["source_system"]
        verbose_name_plural = "source policies"
        constraints = [
            models.CheckConstraint(condition=~Q(source_system=""), name="knowledge_sourcepolicy_source_not_empty")
        ]

    def __str__(self) -> str:
        return self.source_system


class Chunk(models.Model):
    """A token-bounded piece of a record's text, with its search vector and embedding.

    ``acl`` is a copy of the record's ACL written by database triggers (never by code), so
    every candidate list filters one table with one GIN index. The table keeps half of each page
    free (``fillfactor = 50``, migration 0017): a clause reaching the chunks (``acl_also``, which
    no index covers) updates each row in place, without a new entry in the HNSW or GIN indexes.
    """

    record = models.ForeignKey(Record, verbose_name=_("запись"), on_delete=models.DO_NOTHING, related_name="chunks")
    ordinal = models.PositiveIntegerField(_("номер"))
    heading = models.CharField(_("раздел"), max_length=1000, blank=True, default="")
    text = models.TextField(_("текст"))
    acl = ArrayField(models.TextField(), verbose_name=_("доступ (ACL)"), default=list, editable=False)
    acl_also = models.JSONField(
        _("дополнительные условия доступа"), null=True, blank=True, default=None, editable=False
    )
    # the record's flag, copied by the same trigger as ``acl``: the partial index below serves the
    # word counts that decide withheld (knowledge.search.withheld), which read curated chunks only
    user_writable = models.BooleanField(
        _("пишут не только администраторы"), default=True, db_default=True, editable=False
    )
    tsv = models.GeneratedField(
        expression=SearchVector("heading", config=TEXT_SEARCH_CONFIG, weight="A")
        + SearchVector("text", config=TEXT_SEARCH_CONFIG, weight="B"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    created_at = models.DateTimeField(_("создано"), db_default=Now(), editable=False)

    class Meta:
        db_table = "knowledge_chunks"
        ordering = ["record_id", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["record", "ordinal"], name="knowledge_chunk_record_ordinal_unique"),
            models.CheckConstraint(condition=~Q(text=""), name="knowledge_chunk_text_not_empty"),
            models.CheckConstraint(condition=ACL_ALSO_VALID, name="knowledge_chunk_acl_also_valid"),
        ]
        indexes = [
            # no pending list: every search scans these, and a scan reads the whole list (0010)
            GinIndex(fields=["acl"], name="knowledge_chunk_acl_gin", fastupdate=False),
            GinIndex(fields=["tsv"], name="knowledge_chunk_tsv_gin", fastupdate=False),
            GinIndex(
                fields=["tsv"],
                name="knowledge_chunk_cur_tsv_gin",
                fastupdate=False,
                condition=Q(user_writable=False),
            ),
            # m=32/ef_construction=128: recall at a given ef_search is much higher than with
            # pgvector's defaults (bench/knowledge), for a build about twice as long.
            HnswIndex(
                name="knowledge_chunk_emb_hnsw32",
                fields=["embedding"],
                m=32,
                ef_construction=128,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"chunk {self.ordinal} of record {self.record_id}"


class RecordLink(TimestampedModel):
    """A directed, typed link between two records (explicit links now, Jira links later)."""

    from_record = models.ForeignKey(
        Record, verbose_name=_("из записи"), on_delete=models.DO_NOTHING, related_name="links_out"
    )
    to_record = models.ForeignKey(
        Record, verbose_name=_("в запись"), on_delete=models.DO_NOTHING, related_name="links_in"
    )
    link_type = models.CharField(_("тип связи"), max_length=64, default="relates")

    class Meta:
        db_table = "knowledge_record_links"
        constraints = [
            models.UniqueConstraint(fields=["from_record", "to_record", "link_type"], name="knowledge_link_unique"),
            models.CheckConstraint(
                condition=~Q(from_record=F("to_record")),
                name="knowledge_link_not_self",
                violation_error_message="A record cannot link to itself.",
            ),
            models.CheckConstraint(condition=~Q(link_type=""), name="knowledge_link_type_not_empty"),
        ]
        indexes = [models.Index(fields=["to_record"], name="knowledge_link_to_idx")]

    def __str__(self) -> str:
        return f"{self.from_record_id} -{self.link_type}-> {self.to_record_id}"


class PendingLink(models.Model):
    """A link whose target is not stored yet (a page linking to one a later batch brings). The
    database turns it into a ``RecordLink`` when the target's row is inserted, by any write path
    (trigger ``knowledge_records_resolve_pending_links``, migration 0016), and drops it with its
    source record."""

    from_record = models.ForeignKey(Record, on_delete=models.DO_NOTHING, related_name="pending_links_out")
    to_source_system = models.CharField(max_length=64)
    to_external_id = models.CharField(max_length=512)
    link_type = models.CharField(max_length=64)
    created_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        db_table = "knowledge_pending_links"
        constraints = [
            models.UniqueConstraint(
                fields=["from_record", "to_source_system", "to_external_id", "link_type"],
                name="knowledge_pending_link_unique",
            ),
            models.CheckConstraint(condition=~Q(link_type=""), name="knowledge_pending_link_type_not_empty"),
            models.CheckConstraint(condition=~Q(to_external_id=""), name="knowledge_pending_link_target_not_empty"),
        ]
        indexes = [models.Index(fields=["to_source_system", "to_external_id"], name="knowledge_pending_link_to_idx")]

    def __str__(self) -> str:
        return f"{self.from_record_id} -{self.link_type}-> {self.to_source_system}:{self.to_external_id} (pending)"


# The kinds themselves are the contract's (knowledge.contracts.ACCESS_KINDS); these are their labels.
ACCESS_KIND_LABELS = {"answer": _("цитата в ответе"), "click": _("переход по цитате")}


class AccessSignal(models.Model):
    """One use of a record (KS-8): cited in an answer or clicked; feeds the trust decay job."""

    record = models.ForeignKey(
        Record, verbose_name=_("запись"), on_delete=models.DO_NOTHING, related_name="access_signals"
    )
    kind = models.CharField(
        _("вид"), max_length=16, choices=[(kind, ACCESS_KIND_LABELS[kind]) for kind in ACCESS_KINDS]
    )
    principal = models.CharField(_("принципал"), max_length=200, null=True, blank=True)
    message_id = models.CharField(_("ID сообщения"), max_length=64, null=True, blank=True)
    created_at = models.DateTimeField(_("создано"), db_default=Now(), editable=False)

    class Meta:
        db_table = "knowledge_access_signals"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=list(ACCESS_KINDS)), name="knowledge_access_kind_valid"),
            # A cited record counts once per answer (QE-11): a retried register is a no-op.
            models.UniqueConstraint(
                fields=["record", "message_id"],
                condition=Q(kind="answer", message_id__isnull=False),
                name="knowledge_access_answer_once_per_message",
            ),
        ]
        indexes = [models.Index(fields=["record", "created_at"], name="knowledge_access_record_idx")]

    def __str__(self) -> str:
        return f"{self.kind} of record {self.record_id}"


class Document(TimestampedModel):
    """A file uploaded over REST or the web page, parsed in the ``ingest`` queue into one Record.

    The file's bytes live here (bytea), not on a disk: one transactional store, so an upload rolled
    back leaves nothing behind, a delete removes the bytes with the row, and an ``ingest`` worker on
    another machine needs no shared volume. Lists never read the column (``.defer("content")``).
    """

    owner = models.ForeignKey(
        "achilles.User", verbose_name=_("владелец"), on_delete=models.PROTECT, related_name="documents"
    )
    filename = models.CharField(_("имя файла"), max_length=255)
    format = models.CharField(
        _("формат"), max_length=16, help_text=_("Разборщик, выбранный по расширению файла (pdf, docx, …).")
    )
    size = models.PositiveBigIntegerField(_("размер"))
    sha256 = models.CharField(_("SHA-256"), max_length=64)
    content = models.BinaryField(_("содержимое"))
    acl = ArrayField(
        models.TextField(),
        verbose_name=_("доступ (ACL)"),
        help_text=_("Кто может читать получившуюся запись, выбрано при загрузке."),
    )
    state = models.CharField(_("состояние"), max_length=16, choices=DocumentState.choices, default=DocumentState.QUEUED)
    error = models.TextField(
        _("ошибка"),
        blank=True,
        default="",
        help_text=_("Почему документ не разобран или нуждается в распознавании (OCR)."),
    )
    error_code = models.CharField(_("код ошибки"), max_length=32, blank=True, default="")
    title = models.CharField(_("заголовок"), max_length=500, blank=True, default="")
    chunks = models.PositiveIntegerField(_("фрагментов"), default=0)
    attempts = models.PositiveSmallIntegerField(
        _("попыток"),
        default=0,
        help_text=_(
            "Начатые разборы: файл, который каждый раз роняет исполнителя, после нескольких попыток считается ошибочным."
        ),
    )
    record = models.ForeignKey(
        Record,
        verbose_name=_("запись"),
        on_delete=models.DO_NOTHING,  # ON DELETE CASCADE in the database (migration 0012)
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Запись, которой стал документ (есть ровно пока он проиндексирован)."),
    )
    parsed_at = models.DateTimeField(_("разобран"), null=True, blank=True)

    class Meta:
        db_table = "knowledge_documents"
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=DocumentState.values),
                name="knowledge_document_state_valid",
                violation_error_message="Unknown document state.",
            ),
            # A failed or needs-OCR document says why; the others carry no stale reason.
            models.CheckConstraint(
                condition=Q(state__in=DOCUMENT_STATES_WITH_ERROR, error__gt="")
                | (~Q(state__in=DOCUMENT_STATES_WITH_ERROR) & Q(error="")),
                name="knowledge_document_error_iff_failed",
                violation_error_message="A failed document needs its reason, and only a failed one has one.",
            ),
            # indexed ⇔ it has its record: search can never show a record whose upload is «parsing».
            models.CheckConstraint(
                condition=Q(state=DocumentState.INDEXED, record__isnull=False)
                | (~Q(state=DocumentState.INDEXED) & Q(record__isnull=True)),
                name="knowledge_document_record_iff_indexed",
                violation_error_message="An indexed document has its record, and only an indexed one.",
            ),
            models.CheckConstraint(
                condition=Q(size__gt=0) & Q(size=Func(F("content"), function="octet_length")),
                name="knowledge_document_size_matches",
                violation_error_message="The size must be the stored file's length (and not zero).",
            ),
            # nobody could read a document with an empty ACL: the upload names at least one principal
            models.CheckConstraint(condition=~Q(acl=[]), name="knowledge_document_acl_not_empty"),
            models.CheckConstraint(condition=~Q(filename=""), name="knowledge_document_filename_not_empty"),
        ]
        indexes = [models.Index(fields=["owner", "-id"], name="knowledge_document_owner_idx")]

    def __str__(self) -> str:
        return f"{self.filename} ({self.state})"

    @property
    def download_url(self) -> str:
        """The file's download route, absolute (the record's url, what a citation links to)."""
        return settings.PUBLIC_BASE_URL + reverse("api:knowledge_document_download", kwargs={"document_id": self.pk})


# The connectors' tables live with their code (knowledge/connectors/models.py), in this app.
from knowledge.connectors.models import Connector, ConnectorRun, ConnectorRunError  # noqa: E402,F401
