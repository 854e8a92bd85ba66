"""Choices of the Knowledge Store's tables."""

from django.db import models


class DocumentState(models.TextChoices):
    """An uploaded document's way: ``queued → parsing → indexed | failed | needs_ocr``."""

    QUEUED = "queued", "queued"
    PARSING = "parsing", "parsing"
    INDEXED = "indexed", "indexed"
    FAILED = "failed", "failed"
    NEEDS_OCR = "needs_ocr", "needs OCR"


# States whose ``error`` says why (and only those carry one)
DOCUMENT_STATES_WITH_ERROR = (DocumentState.FAILED, DocumentState.NEEDS_OCR)
