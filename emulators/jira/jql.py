"""The emulator's strict JQL.

Real Jira answers 400 to a clause it does not understand; an emulator that silently ignores one
would let a wrong query pass every test. So anything outside this grammar is a ``JqlError`` (the
server turns it into Jira's 400 shape):

    query   := [expr] [ORDER BY field [ASC|DESC] {, field [ASC|DESC]}]
    expr    := term {OR term}          term := factor {AND factor}
    factor  := NOT factor | ( expr ) | clause
    clause  := field (= | != | IN | NOT IN) value(s)        project key issuekey status labels issuetype
                                                             type priority resolution assignee reporter
                                                             creator sprint component
             | field IS [NOT] (EMPTY | NULL)
             | (summary|description|comment|text) (~ | !~) text query
             | (updated|created|resolutiondate|duedate|due) (= != > >= < <=) date

Values are words, quoted strings, ``EMPTY`` / ``NULL`` or the functions ``currentUser()``,
``openSprints()``, ``closedSprints()``, ``futureSprints()``, ``now()``. As in Jira, ``!=`` and
``NOT IN`` never match an issue whose field is empty, and ``resolution = Unresolved`` is an empty
resolution. Dates are ``"yyyy-MM-dd HH:mm"``, ``"yyyy/MM/dd HH:mm"`` or ``"yyyy-MM-dd"`` (minute-
granular, UTC — the emulator's users all sit in UTC), or relative ``-5m`` / ``-2h`` / ``-1d``.

A predicate is ``(issue, user, env)``: ``env`` (the store) answers what the issue record does not
hold — a sprint's state and name (``env.sprints``).
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
    """A query outside the grammar; the message is what Jira would say."""


Predicate = Callable[..., bool]

_TOKEN = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<op>>=|<=|!=|!~|[=<>~(),])|(?P<word>[^\s=<>~!(),"']+))"""
)

# field name (as written, folded) → the issue record's attribute
_FIELDS_VALUE = {
    "project": "project",
    "key": "key",
    "issuekey": "key",
    "id": "key",
    "status": "status",
    "labels": "labels",
    "issuetype": "issuetype",
    "type": "issuetype",
    "priority": "priority",
    "resolution": "resolution",
    "assignee": "assignee",
    "reporter": "reporter",
    "creator": "creator",
    "sprint": "sprint_ids",
    "component": "components",
}
_FIELDS_DATE = {
    "updated": "updated",
    "created": "created",
    "resolutiondate": "resolutiondate",
    "resolved": "resolutiondate",
    "duedate": "duedate",
    "due": "duedate",
}
_FIELDS_TEXT = {"summary", "description", "comment", "text"}
_USER_FIELDS = {"assignee", "reporter", "creator"}
# ORDER BY: what Jira sorts by (the store computes the value); labels and the text fields do not sort.
SORTABLE = {
    "key": "key",
    "issuekey": "key",
    "id": "key",
    "updated": "updated",
    "created": "created",
    "resolutiondate": "resolutiondate",
    "resolved": "resolutiondate",
    "duedate": "duedate",
    "due": "duedate",
    "priority": "priority",
    "status": "status",
    "summary": "summary",
    "assignee": "assignee",
    "reporter": "reporter",
    "creator": "creator",
    "issuetype": "issuetype",
    "type": "issuetype",
    "resolution": "resolution",
    "project": "project",
    "sprint": "sprint",
    "component": "components",
}
_NOT_SORTABLE = {"labels", "description", "comment", "text", "environment"}
_SPRINT_FUNCTIONS = {"opensprints": {"active", "future"}, "closedsprints": {"closed"}, "futuresprints": {"future"}}


@dataclass
class Query:
    clauses: list[Predicate] = field(default_factory=list)  # all must hold (one per top-level expression)
    order: list[tuple[str, bool]] = field(default_factory=list)  # (sort field, descending)
    keys: list[str] = field(default_factory=list)  # issue keys named by key clauses (Jira validates them)
    text: str = ""


@dataclass(frozen=True)
class _Fn:
    """A JQL function call as a value, e.g. ``currentUser()``."""

    name: str  # folded


_EMPTY = object()


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


class _Parser:
    def __init__(self, jql: str, now: dt.datetime | None) -> None:
        self.tokens = _tokens(jql or "")
        self.i = 0
        self.now = now
        self.query = Query(text=jql)

    # ---- token helpers ------------------------------------------------------------------------
    def peek(self, k: int = 0) -> tuple[str, str] | None:
        return self.tokens[self.i + k] if self.i + k < len(self.tokens) else None

    def is_kw(self, word: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok[0] == "word" and tok[1].upper() == word

    def at_order_by(self) -> bool:
        return self.is_kw("ORDER") and self.is_kw("BY", 1)

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise JqlError("Error in the JQL Query: Expecting either a value, list or function but got end of query.")
        self.i += 1
        return tok

    # ---- grammar ------------------------------------------------------------------------------
    def parse(self) -> Query:
        if self.peek() is not None and not self.at_order_by():
            self.query.clauses.append(self.expr())
        if self.at_order_by():
            self.i += 2
            self.order_by()
        if self.peek() is not None:
            raise JqlError(f"Error in the JQL Query: Expecting either 'OR' or 'AND' but got '{self.peek()[1]}'.")
        return self.query

    def expr(self) -> Predicate:
        terms = [self.term()]
        while self.is_kw("OR") or self.is_kw("||"):
            self.i += 1
            terms.append(self.term())
        if len(terms) == 1:
            return terms[0]
        return lambda issue, user, env=None: any(t(issue, user, env) for t in terms)

    def term(self) -> Predicate:
        factors = [self.factor()]
        while self.is_kw("AND") or self.is_kw("&&"):
            self.i += 1
            factors.append(self.factor())
        if len(factors) == 1:
            return factors[0]
        return lambda issue, user, env=None: all(f(issue, user, env) for f in factors)

    def factor(self) -> Predicate:
        tok = self.peek()
        if tok is None or self.at_order_by():
            raise JqlError("Error in the JQL Query: Expecting a field name but got end of query.")
        if self.is_kw("NOT"):
            self.i += 1
            inner = self.factor()
            return lambda issue, user, env=None: not inner(issue, user, env)
        if tok == ("op", "("):
            self.i += 1
            inner = self.expr()
            if self.peek() != ("op", ")"):
                raise JqlError("Error in the JQL Query: Expecting ')' before the end of the query.")
            self.i += 1
            return inner
        return self.clause()

    def value(self) -> Any:
        tok = self.take()
        if tok[0] == "op":
            raise JqlError(f"Error in the JQL Query: Expecting either a value, list or function but got '{tok[1]}'.")
        if tok[0] == "word" and tok[1].upper() in ("EMPTY", "NULL"):
            return _EMPTY
        if tok[0] == "word" and self.peek() == ("op", "("):
            self.i += 1
            if self.peek() != ("op", ")"):
                raise JqlError(f"Error in the JQL Query: the function '{tok[1]}' takes no arguments here.")
            self.i += 1
            name = tok[1].casefold()
            if name not in ("currentuser", "now", *_SPRINT_FUNCTIONS):
                raise JqlError(f"Unable to find JQL function '{tok[1]}()'.")
            return _Fn(name)
        return tok[1]

    def values(self) -> list[Any]:
        if self.peek() != ("op", "("):
            raise JqlError("Error in the JQL Query: Expecting '(' after IN.")
        self.i += 1
        out = []
        while True:
            out.append(self.value())
            nxt = self.take()
            if nxt == ("op", ","):
                continue
            if nxt == ("op", ")"):
                return out
            raise JqlError("Error in the JQL Query: Expecting ',' or ')' in the value list.")

    def clause(self) -> Predicate:
        tok = self.take()
        if tok[0] != "word":
            raise JqlError(f"Error in the JQL Query: Expecting a field name but got '{tok[1]}'.")
        written = tok[1]
        fname = written.casefold()
        if fname not in _FIELDS_VALUE and fname not in _FIELDS_DATE and fname not in _FIELDS_TEXT:
            raise JqlError(f"Field '{written}' does not exist or you do not have permission to view it.")
        op = self.peek()
        if op is None:
            raise JqlError("Error in the JQL Query: Expecting operator but got end of query.")
        self.i += 1
        opv = op[1].upper()
        if opv == "NOT" and self.is_kw("IN"):
            self.i += 1
            opv = "NOT IN"
        elif opv == "IS":
            negate = self.is_kw("NOT")
            if negate:
                self.i += 1
            if self.value() is not _EMPTY:
                raise JqlError(f"The operator 'IS' only supports EMPTY or NULL (field '{written}').")
            attr = _FIELDS_VALUE.get(fname) or _FIELDS_DATE.get(fname) or fname
            if fname in _FIELDS_TEXT:
                raise JqlError(f"The operator 'is' is not supported by the '{written}' field.")
            return lambda issue, user, env=None: _is_empty(issue.get(attr)) != negate
        if fname in _FIELDS_TEXT:
            return self.text_clause(written, fname, opv)
        if fname in _FIELDS_DATE:
            return self.date_clause(written, _FIELDS_DATE[fname], opv)
        return self.value_clause(written, fname, opv)

    def text_clause(self, written: str, fname: str, opv: str) -> Predicate:
        if opv not in ("~", "!~"):
            raise JqlError(f"The operator '{opv.lower()}' is not supported by the '{written}' field.")
        value = self.value()
        if not isinstance(value, str):
            raise JqlError(f"The field '{written}' takes a text value.")
        try:
            matcher = textsearch.compile_query(value)
        except textsearch.TextQueryError:
            raise JqlError(
                f"The text query '{value}' for field '{written}' is not valid: probably your query contains "
                "invalid characters."
            ) from None
        negate = opv == "!~"
        return lambda issue, user, env=None: matcher(textsearch.Doc.of(_text_of(fname, issue))) != negate

    def date_clause(self, written: str, attr: str, opv: str) -> Predicate:
        if opv not in ("=", "!=", ">=", ">", "<=", "<"):
            raise JqlError(f"The operator '{opv.lower()}' is not supported by the '{written}' field.")
        value = self.value()
        if isinstance(value, _Fn) and value.name == "now":
            when = self.now or dt.datetime.now(UTC)
        elif isinstance(value, str):
            when = parse_date(value, now=self.now)
        else:
            raise JqlError(f"The value for field '{written}' must be a date.")
        compare: dict[str, Callable[[dt.datetime], bool]] = {
            "=": lambda a: a == when,
            "!=": lambda a: a != when,
            ">=": lambda a: a >= when,
            ">": lambda a: a > when,
            "<=": lambda a: a <= when,
            "<": lambda a: a < when,
        }
        test = compare[opv]

        # Jira compares at minute granularity: `updated >= "11:50"` includes 11:50:00.000 onwards.
        def clause(issue: dict[str, Any], user: str, env: Any = None) -> bool:
            got = _as_datetime(issue.get(attr))
            return got is not None and test(got)

        return clause

    def value_clause(self, written: str, fname: str, opv: str) -> Predicate:
        if opv in ("=", "!="):
            values = [self.value()]
        elif opv in ("IN", "NOT IN") and self.peek() != ("op", "("):
            values = [self.value()]  # `IN openSprints()`: a function standing for a list
            if not isinstance(values[0], _Fn):
                raise JqlError("Error in the JQL Query: Expecting '(' after IN.")
        elif opv in ("IN", "NOT IN"):
            values = self.values()
        else:
            raise JqlError(f"The operator '{opv.lower()}' is not supported by the '{written}' field.")
        for v in values:
            if isinstance(v, _Fn):
                if v.name == "currentuser" and fname not in _USER_FIELDS:
                    raise JqlError(f"The function 'currentUser' is not supported by the '{written}' field.")
                if v.name in _SPRINT_FUNCTIONS and fname != "sprint":
                    raise JqlError(f"The function '{v.name}' is not supported by the '{written}' field.")
                if v.name == "now":
                    raise JqlError(f"The function 'now' is not supported by the '{written}' field.")
                if v.name in _SPRINT_FUNCTIONS and opv in ("=", "!="):  # list functions take IN only
                    raise JqlError(f"The operator '{opv}' is not supported by the function '{v.name}'; use IN.")
        if fname in ("key", "issuekey", "id"):
            self.query.keys.extend(v for v in values if isinstance(v, str))
        attr = _FIELDS_VALUE[fname]
        negate = opv in ("!=", "NOT IN")

        def clause(issue: dict[str, Any], user: str, env: Any = None) -> bool:
            have = _values_of(issue, attr, env)
            wants_empty = any(v is _EMPTY for v in values)
            if negate:
                # Jira: `!=` / NOT IN never match an empty field (unless EMPTY is named: `!= EMPTY`).
                if not have:
                    return False
                return not any(_match(v, have, issue, attr, user, env) for v in values if v is not _EMPTY)
            if not have:
                return wants_empty or (attr == "resolution" and any(_is_unresolved(v) for v in values))
            return any(_match(v, have, issue, attr, user, env) for v in values if v is not _EMPTY)

        return clause

    def order_by(self) -> None:
        while True:
            tok = self.peek()
            if tok is None or tok[0] not in ("word", "str"):
                raise JqlError("Error in the JQL Query: Expecting a field name after ORDER BY.")
            name = tok[1].casefold()
            if name in _NOT_SORTABLE:
                raise JqlError(f"Field '{tok[1]}' does not support sorting.")
            if name not in SORTABLE:
                raise JqlError(f"Not able to sort using field '{tok[1]}'.")
            self.i += 1
            desc = False
            if self.is_kw("ASC") or self.is_kw("DESC"):
                desc = self.take()[1].upper() == "DESC"
            self.query.order.append((SORTABLE[name], desc))
            if self.peek() == ("op", ","):
                self.i += 1
                continue
            break
        if self.peek() is not None:
            raise JqlError(f"Error in the JQL Query: Expecting end of query after ORDER BY but got '{self.peek()[1]}'.")


def parse(jql: str, *, now: dt.datetime | None = None) -> Query:
    """Parse ``jql`` into predicates over an issue record ``(issue, current_user, env)``."""
    return _Parser(jql, now).parse()


# ---- evaluation helpers ---------------------------------------------------------------------------
def _is_empty(value: Any) -> bool:
    return value is None or value == [] or value == ""


def _is_unresolved(value: Any) -> bool:
    return isinstance(value, str) and value.casefold() == "unresolved"


def _as_datetime(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromisoformat(str(value)).replace(tzinfo=UTC)  # duedate: "yyyy-MM-dd"


def _values_of(issue: dict[str, Any], attr: str, env: Any) -> list[Any]:
    value = issue.get(attr)
    if value is None or value == "":
        return []
    return list(value) if isinstance(value, list) else [value]


def _match(want: Any, have: list[Any], issue: dict[str, Any], attr: str, user: str, env: Any) -> bool:
    if isinstance(want, _Fn):
        if want.name == "currentuser":
            return user in have
        states = _SPRINT_FUNCTIONS[want.name]
        sprints = getattr(env, "sprints", {}) or {}
        # openSprints(): the issue's sprints that are active or future; closedSprints(): any closed one.
        return any(sprints.get(s, {}).get("state") in states for s in have)
    folded = str(want).casefold()
    if attr == "sprint_ids":
        sprints = getattr(env, "sprints", {}) or {}
        return any(str(s) == str(want) or str(sprints.get(s, {}).get("name", "")).casefold() == folded for s in have)
    return any(str(h).casefold() == folded for h in have)


def _text_of(fname: str, issue: dict[str, Any]) -> str:
    summary = issue.get("summary") or ""
    description = issue.get("description") or ""
    comments = " ".join(c.get("body") or "" for c in issue.get("comments") or [])
    return {"summary": summary, "description": description, "comment": comments}.get(
        fname, f"{summary} {description} {comments}"
    )
