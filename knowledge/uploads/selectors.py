"""Reads of uploaded documents, permission built in: others' documents are not found (404)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from achilles.errors import NotFound
from achilles.models import User
from achilles.pagination import Window, keyset_page
from knowledge.contracts import Identity
from knowledge.models import Document
from knowledge.selectors import visible_records


def _documents_for(user: User) -> QuerySet[Document]:
    documents = Document.objects.defer("content")
    return documents if user.is_staff else documents.filter(owner=user)


def document_page_for_user(*, user: User, cursor: str | None, limit: int) -> Window:
    """The uploader's own documents (staff: everyone's), newest first."""
    return keyset_page(_documents_for(user), scope="knowledge-documents", keys=("-id",), cursor=cursor, limit=limit)


def document_get_for_user(*, user: User, document_id: int) -> Document:
    """One document of the uploader's (staff: anyone's); otherwise NotFound."""
    document = _documents_for(user).filter(pk=document_id).first()
    if document is None:
        raise NotFound(_("Документ не найден."), code="document_not_found")
    return document


def document_file_for_user(*, user: User, document_id: int) -> Document:
    """The document with its bytes, for someone the record's ACL lets read it (its owner before it
    is indexed); otherwise NotFound — a download never tells that a document exists."""
    document = Document.objects.filter(pk=document_id).first()
    if document is None:
        raise NotFound(_("Документ не найден."), code="document_not_found")
    if document.record_id is not None:
        # the record's ACL as it is now (an admin may have changed it since the upload)
        if document.record_id in visible_records([document.record_id], Identity.for_user(user)):
            return document
    elif document.owner_id == user.pk:
        return document
    raise NotFound(_("Документ не найден."), code="document_not_found")
