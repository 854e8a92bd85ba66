"""Exact identifiers of a query, matched first on the lexical side.

A question that names an identifier — a Jira key (``AURORA-9001``), an error code (``ERR-502``,
``E1234``, ``0x80070005``), a version (``4.2``, ``v2.10.1``), an e-mail address or a file name
(``report_2026.xlsx``) — is about the record that carries it. Coordination levels and RRF do not
know that: «Что с задачей AURORA-9001?» shares «задача» and «AURORA» with every issue of the
project, the vector list ranks neighbours of the same shape first, and the fused top k held
AURORA-9009 and AURORA-9024 but not AURORA-9001's own description.

So the lexical side reads one more list when the query has identifiers: the visible chunks whose
text or title holds one of them as a phrase of PostgreSQL's own tokens (``phraseto_tsquery``:
``AURORA-9001`` is ``'aurora' <-> '-9001'``, never ``AURORA-90011``), with the ACL in the WHERE
clause like every other list. Search puts them first (``knowledge.fusion.exact_first``): a record
whose title names the identifier, then a chunk whose text does, then the chunk sharing most of the
query's words, then ``ts_rank``. Nothing here can surface a chunk the reader cannot read.
"""

from __future__ import annotations

import re
from typing import Final

from knowledge.models import TEXT_SEARCH_CONFIG

MAX_IDENTIFIERS = 4

# A token of the question (its punctuation around stripped) is an identifier when it is an e-mail
# address, a file name with a short extension, a dotted version, or a word mixing letters and
# digits (letters, digits, «-», «_», «.» inside): AURORA-9001, ERR-502, E1234, pg-prod-01, G4.
_TOKEN = re.compile(r"[\w@.+-]+", re.UNICODE)
_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")
_FILE = re.compile(r"^[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{1,4}$")
_VERSION = re.compile(r"^[vV]?\d+(?:\.\d+)+$")
_MIXED = re.compile(r"^(?=[\w.-]*\d)(?=[\w.-]*[^\W\d_])[^\W_][\w.-]*[^\W_]$", re.UNICODE)
_CYRILLIC = re.compile(r"[А-Яа-яЁё]")


def query_identifiers(query: str) -> list[str]:
    """The identifiers ``query`` names, in order, without repeats (case aside), at most
    MAX_IDENTIFIERS. A Cyrillic word with a digit («2-й», «3-х») is not one; nor is a plain number."""
    found: dict[str, str] = {}
    for raw in _TOKEN.findall(query):
        token = raw.strip(".-+")
        if not token or _CYRILLIC.search(token) or token.isdigit():
            continue
        if _EMAIL.match(token) or _VERSION.match(token) or _MIXED.match(token) or _FILE.match(token):
            found.setdefault(token.casefold(), token)
    return list(found.values())[:MAX_IDENTIFIERS]


def like_pattern(identifier: str) -> str:
    """An ILIKE pattern matching ``identifier`` anywhere, its wildcards escaped."""
    escaped = identifier.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def exact_statement(identifiers: list[str]) -> tuple[str, dict[str, object]]:
    """The visible chunks holding one of ``identifiers`` (a phrase of the store's text search
    tokens), best first, at most ``%(n_visible)s``; rows are (chunk id, …ordering columns). Needs
    the search's ``principals``, ``query`` and ``n_visible`` parameters."""
    phrases = " || ".join(f"phraseto_tsquery('{TEXT_SEARCH_CONFIG}', %(exact_{j})s)" for j in range(len(identifiers)))
    sql = f"""
SELECT c.id,
       r.title ILIKE ANY(%(exact_like)s) AS in_title,
       c.text ILIKE ANY(%(exact_like)s) AS in_text,
       (SELECT count(*) FROM unnest(tsvector_to_array(c.tsv)) l
        WHERE l = ANY(tsvector_to_array(to_tsvector('{TEXT_SEARCH_CONFIG}', %(query)s)))) AS shared,
       ts_rank(c.tsv, ({phrases}), 1) AS score
FROM knowledge_chunks c JOIN knowledge_records r ON r.id = c.record_id
WHERE c.tsv @@ ({phrases}) AND knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[])
ORDER BY in_title DESC, in_text DESC, shared DESC, score DESC, c.id
LIMIT %(n_visible)s
"""
    params: dict[str, object] = {f"exact_{j}": identifier for j, identifier in enumerate(identifiers)}
    params["exact_like"] = [like_pattern(identifier) for identifier in identifiers]
    return sql, params


class ExactRow:
    """Columns of a row of ``exact_statement``: the chunk id first (the rest order the rows)."""

    CHUNK_ID: Final = 0
