"""Choices of the Knowledge Store's tables."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class DocumentState(models.TextChoices):
    """An uploaded document's way: ``queued → parsing → indexed | failed | needs_ocr``."""

    QUEUED = "queued", _("в очереди")
    PARSING = "parsing", _("разбирается")
    INDEXED = "indexed", _("проиндексирован")
    FAILED = "failed", _("ошибка")
    NEEDS_OCR = "needs_ocr", _("нужно распознавание (OCR)")


# States whose ``error`` says why (and only those carry one)
DOCUMENT_STATES_WITH_ERROR = (DocumentState.FAILED, DocumentState.NEEDS_OCR)
