"""Uploaded documents (office files over REST): the writes in ``services``, the reads in ``selectors``.

An upload stores the file and its ACL in a ``knowledge.Document`` (state ``queued``) and, after
commit, sends ``document_parse_task`` to the ``ingest`` queue. The task parses the file
(``knowledge.parsers``), upserts one Record (source system ``uploads``, external id the document's
id, author its owner, url its download route, ``user_writable``) and moves the document to
``indexed``, ``failed`` (with the reason) or ``needs_ocr``. Re-delivered after a worker's death, it
upserts the same record again (an upsert by (source_system, external_id)), so nothing doubles.
"""
