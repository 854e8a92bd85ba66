"""The emulator's strict JQL subset.

Real Jira answers 400 to a clause it does not understand; an emulator that silently ignores one
would let a wrong query pass every test. So anything outside this grammar is a ``JqlError`` (the
server turns it into Jira's 400 shape):

    query   := [clause {AND clause}] [ORDER BY field [ASC|DESC] {, field [ASC|DESC]}]
    clause  := project (=|IN) value(s) | labels (=|IN) value(s) | key (=|IN) value(s)
             | status (=|IN) value(s) | (summary|description|comment|text) ~ text query
             | (updated|created) (>=|>|<=|<) date | creator = currentUser()

Dates are ``"yyyy-MM-dd HH:mm"``, ``"yyyy/MM/dd HH:mm"`` or ``"yyyy-MM-dd"`` (minute-granular, UTC —
the emulator's users all sit in UTC), or relative ``-5m`` / ``-2h`` / ``-1d``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from emulators.jira import textsearch

UTC = dt.UTC


class JqlError(ValueError):
    """A query outside the subset; the message is what Jira would say."""


_TOKEN = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<op>>=|<=|!=|[=<>~(),])|(?P<word>[^\s=<>~!(),"']+))"""
)

_FIELDS_EQ = {"project", "labels", "key", "issuekey", "status"}
_FIELDS_DATE = {"updated", "created"}
_FIELDS_TEXT = {"summary", "description", "comment", "text"}
_ORDER_FIELDS = {"key", "updated", "created", "issuekey"}


@dataclass
class Query:
    clauses: list[Callable[[dict[str, Any], str], bool]] = field(default_factory=list)
    order: list[tuple[str, bool]] = field(default_factory=list)  # (field, descending)
    keys: list[str] = field(default_factory=list)  # issue keys named by key clauses (Jira validates them)
    text: str = ""


def _tokens(jql: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(jql):
        if jql[pos:].strip() == "":
            break
        m = _TOKEN.match(jql, pos)
        if not m or m.end() == pos:
            raise JqlError(
                f"Error in the JQL Query: The character '{jql[pos]}' is a reserved JQL character. (line 1, character {pos + 1})"
            )
        pos = m.end()
        if m.group("str") is not None:
            raw = m.group("str")[1:-1]
            out.append(("str", re.sub(r"\\(.)", r"\1", raw)))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            out.append(("word", m.group("word")))
    return out


def parse_date(value: str, *, now: dt.datetime | None = None) -> dt.datetime:
    now = now or dt.datetime.now(UTC)
    rel = re.fullmatch(r"([-+]?)(\d+)([mhdw])", value.strip())
    if rel:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[rel.group(3)]
        delta = dt.timedelta(**{unit: int(rel.group(2))})
        return now - delta if rel.group(1) == "-" else now + delta
    for fmt in ("%Y-%m-%d %H:%M", "%Y/%m/%d %H:%M", "%Y-%m-%d", "%Y/%m/%d"):
        try:
            return dt.datetime.strptime(value.strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise JqlError(
        f"Date value '{value}' for field 'updated' is invalid. Valid formats include: 'yyyy/MM/dd HH:mm', "
        "'yyyy-MM-dd HH:mm', 'yyyy/MM/dd', 'yyyy-MM-dd', or a period format e.g. '-5d', '4w 2d'."
    )


def parse(jql: str, *, now: dt.datetime | None = None) -> Query:
    """Parse ``jql`` into predicates over an issue record ``(issue, current_user)``."""
    tokens = _tokens(jql or "")
    query = Query(text=jql)
    i = 0

    def peek(k: int = 0) -> tuple[str, str] | None:
        return tokens[i + k] if i + k < len(tokens) else None

    def expect_value() -> str:
        nonlocal i
        tok = peek()
        if tok is None or tok[0] == "op":
            raise JqlError("Error in the JQL Query: Expecting either a value, list or function but got end of query.")
        i += 1
        return tok[1]

    def is_kw(tok: tuple[str, str] | None, word: str) -> bool:
        return tok is not None and tok[0] == "word" and tok[1].upper() == word

    expecting_clause = True
    while i < len(tokens):
        tok = peek()
        if is_kw(tok, "ORDER") and is_kw(peek(1), "BY"):
            i += 2
            while True:
                f = peek()
                if f is None or f[0] != "word":
                    raise JqlError("Error in the JQL Query: Expecting a field name after ORDER BY.")
                name = f[1].casefold()
                if name not in _ORDER_FIELDS:
                    raise JqlError(f"Not able to sort using field '{f[1]}'.")
                i += 1
                desc = False
                if is_kw(peek(), "ASC") or is_kw(peek(), "DESC"):
                    desc = peek()[1].upper() == "DESC"
                    i += 1
                query.order.append(("key" if name == "issuekey" else name, desc))
                if peek() == ("op", ","):
                    i += 1
                    continue
                break
            if i < len(tokens):
                raise JqlError(f"Error in the JQL Query: Expecting end of query after ORDER BY but got '{peek()[1]}'.")
            break
        if not expecting_clause:
            if is_kw(tok, "AND"):
                i += 1
                expecting_clause = True
                continue
            if is_kw(tok, "OR") or is_kw(tok, "NOT"):
                raise JqlError(f"Error in the JQL Query: the emulator supports AND only, got '{tok[1]}'.")
            raise JqlError(f"Error in the JQL Query: Expecting either 'OR' or 'AND' but got '{tok[1]}'.")
        if tok[0] != "word":
            raise JqlError(f"Error in the JQL Query: Expecting a field name but got '{tok[1]}'.")
        fname = tok[1].casefold()
        i += 1
        op = peek()
        if op is None:
            raise JqlError("Error in the JQL Query: Expecting operator but got end of query.")
        opv = op[1].upper()
        i += 1
        if fname in _FIELDS_EQ:
            if opv == "=":
                values = [expect_value()]
            elif opv == "IN":
                if peek() != ("op", "("):
                    raise JqlError("Error in the JQL Query: Expecting '(' after IN.")
                i += 1
                values = []
                while True:
                    values.append(expect_value())
                    nxt = peek()
                    i += 1
                    if nxt == ("op", ","):
                        continue
                    if nxt == ("op", ")"):
                        break
                    raise JqlError("Error in the JQL Query: Expecting ',' or ')' in the value list.")
            else:
                raise JqlError(f"The operator '{op[1]}' is not supported by the '{tok[1]}' field.")
            query.clauses.append(_eq_clause(fname, values))
            if fname in ("key", "issuekey"):
                query.keys.extend(values)
        elif fname in _FIELDS_DATE:
            if opv not in (">=", ">", "<=", "<"):
                raise JqlError(f"The operator '{op[1]}' is not supported by the '{tok[1]}' field.")
            when = parse_date(expect_value(), now=now)
            query.clauses.append(_date_clause(fname, opv, when))
        elif fname == "creator":
            value = expect_value()
            if opv != "=" or value.casefold() != "currentuser" or peek() != ("op", "("):
                raise JqlError("The emulator supports only 'creator = currentUser()'.")
            i += 1
            if peek() != ("op", ")"):
                raise JqlError("Error in the JQL Query: Expecting ')' after currentUser(.")
            i += 1
            query.clauses.append(lambda issue, user: issue["creator"] == user)
        elif fname in _FIELDS_TEXT:
            if opv != "~":
                raise JqlError(f"The operator '{op[1]}' is not supported by the '{tok[1]}' field.")
            value = expect_value()
            try:
                matcher = textsearch.compile_query(value)
            except textsearch.TextQueryError:
                raise JqlError(
                    f"The text query '{value}' for field '{tok[1]}' is not valid: probably your query contains "
                    "invalid characters."
                ) from None
            query.clauses.append(_text_clause(fname, matcher))
        else:
            raise JqlError(f"Field '{tok[1]}' does not exist or you do not have permission to view it.")
        expecting_clause = False
    if expecting_clause and query.clauses:
        raise JqlError("Error in the JQL Query: Expecting a field name but got end of query.")
    return query


def _eq_clause(fname: str, values: list[str]) -> Callable[[dict[str, Any], str], bool]:
    folded = {v.casefold() for v in values}
    if fname == "project":
        return lambda issue, user: issue["project"].casefold() in folded
    if fname == "labels":
        return lambda issue, user: any(label.casefold() in folded for label in issue["labels"])
    if fname == "status":
        return lambda issue, user: issue["status"].casefold() in folded
    return lambda issue, user: issue["key"].casefold() in folded


def _date_clause(fname: str, opv: str, when: dt.datetime) -> Callable[[dict[str, Any], str], bool]:
    # Jira compares at minute granularity: `updated >= "11:50"` includes 11:50:00.000 onwards.
    compare = {">=": lambda a: a >= when, ">": lambda a: a > when, "<=": lambda a: a <= when, "<": lambda a: a < when}[
        opv
    ]
    return lambda issue, user: compare(issue[fname])


def _text_of(fname: str, issue: dict[str, Any]) -> str:
    summary = issue.get("summary") or ""
    description = issue.get("description") or ""
    comments = " ".join(c.get("body") or "" for c in issue.get("comments") or [])
    return {"summary": summary, "description": description, "comment": comments}.get(
        fname, f"{summary} {description} {comments}"
    )


def _text_clause(fname: str, matcher: textsearch.Matcher) -> Callable[[dict[str, Any], str], bool]:
    return lambda issue, user: matcher(textsearch.Doc.of(_text_of(fname, issue)))
