"""The CQL subset the emulator understands, parsed into a predicate over content plus an order.

Fields: ``type``, ``space``, ``id``, ``ancestor``, ``parent``, ``container``, ``title``,
``lastmodified``, ``created``; operators ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``,
``not in`` and ``~`` (title contains); ``and`` / ``or`` / parentheses; ``order by`` a date, ``id`` or
``title`` with ``asc`` / ``desc``. Dates are ``yyyy/MM/dd HH:mm``, ``yyyy-MM-dd HH:mm`` or a date
alone, read in the server's time zone, compared at minute resolution (Confluence indexes dates to the
minute). Anything else is refused as Confluence refuses it: ``CqlError`` → 400 "Could not parse cql : …".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Predicate = Callable[[dict[str, Any]], bool]

FIELDS = {"type", "space", "id", "ancestor", "parent", "container", "title", "lastmodified", "created"}
DATE_FIELDS = {"lastmodified", "created"}
ORDER_FIELDS = {"lastmodified", "created", "id", "title"}
_TOKEN = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<op>!=|>=|<=|=|>|<|~|\(|\)|,)|(?P<word>[^\s=!<>~(),"']+))"""
)


class CqlError(ValueError):
    """The query is not CQL the server can run (→ 400 "Could not parse cql : <cql>")."""


@dataclass
class Query:
    match: Predicate
    order: list[tuple[str, bool]]  # (field, descending)


def _tokens(cql: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(cql):
        if cql[pos:].strip() == "":
            break
        m = _TOKEN.match(cql, pos)
        if not m or m.end() == pos:
            raise CqlError(cql)
        pos = m.end()
        kind = m.lastgroup or ""
        text = m.group(kind)
        if kind == "str":
            text = re.sub(r"\\(.)", r"\1", text[1:-1])
        out.append((kind, text))
    return out


def parse_date(text: str, tz: dt.tzinfo) -> tuple[dt.datetime, bool]:
    """(the moment in the server's zone, whether only a date was given)."""
    for fmt, date_only in (
        ("%Y/%m/%d %H:%M", False),
        ("%Y-%m-%d %H:%M", False),
        ("%Y/%m/%d", True),
        ("%Y-%m-%d", True),
    ):
        try:
            return dt.datetime.strptime(text.strip(), fmt).replace(tzinfo=tz), date_only
        except ValueError:
            continue
    raise CqlError(text)


def _minute(when: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    return when.astimezone(tz).replace(second=0, microsecond=0)


class _Parser:
    def __init__(self, cql: str, tz: dt.tzinfo):
        self.cql = cql
        self.toks = _tokens(cql)
        self.i = 0
        self.tz = tz

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise CqlError(self.cql)
        self.i += 1
        return tok

    def keyword(self, *words: str) -> bool:
        tok = self.peek()
        if tok and tok[0] == "word" and tok[1].lower() in words:
            self.i += 1
            return True
        return False

    def parse(self) -> Query:
        match = self.or_expr()
        order: list[tuple[str, bool]] = []
        if self.keyword("order"):
            if not self.keyword("by"):
                raise CqlError(self.cql)
            while True:
                kind, name = self.next()
                if kind != "word" or name.lower() not in ORDER_FIELDS:
                    raise CqlError(self.cql)
                desc = False
                if self.keyword("desc"):
                    desc = True
                else:
                    self.keyword("asc")
                order.append((name.lower(), desc))
                tok = self.peek()
                if tok == ("op", ","):
                    self.i += 1
                    continue
                break
        if self.peek() is not None:
            raise CqlError(self.cql)
        return Query(match, order)

    def or_expr(self) -> Predicate:
        parts = [self.and_expr()]
        while self.keyword("or"):
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else (lambda c: any(p(c) for p in parts))

    def and_expr(self) -> Predicate:
        parts = [self.unary()]
        while self.keyword("and"):
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else (lambda c: all(p(c) for p in parts))

    def unary(self) -> Predicate:
        if self.peek() == ("op", "("):
            self.i += 1
            inner = self.or_expr()
            if self.next() != ("op", ")"):
                raise CqlError(self.cql)
            return inner
        return self.clause()

    def value(self) -> str:
        kind, text = self.next()
        if kind == "op":
            raise CqlError(self.cql)
        if kind == "word" and self.peek() == ("op", "("):  # a function such as now("-1d"): not in the subset
            raise CqlError(self.cql)
        return text

    def clause(self) -> Predicate:
        kind, field = self.next()
        field = field.lower()
        if kind != "word" or field not in FIELDS:
            raise CqlError(self.cql)
        if self.keyword("not"):
            if not self.keyword("in"):
                raise CqlError(self.cql)
            op = "not in"
        elif self.keyword("in"):
            op = "in"
        else:
            okind, op = self.next()
            if okind != "op" or op not in {"=", "!=", ">", ">=", "<", "<=", "~"}:
                raise CqlError(self.cql)
        if op in ("in", "not in"):
            if self.next() != ("op", "("):
                raise CqlError(self.cql)
            values = [self.value()]
            while self.peek() == ("op", ","):
                self.i += 1
                values.append(self.value())
            if self.next() != ("op", ")"):
                raise CqlError(self.cql)
            if field in DATE_FIELDS:
                raise CqlError(self.cql)
            inside = self._equals(field, values)
            return inside if op == "in" else (lambda c: not inside(c))
        value = self.value()
        if field in DATE_FIELDS:
            return self._date(field, op, value)
        if op == "~":
            if field != "title":
                raise CqlError(self.cql)
            needle = value.casefold().strip("*")
            return lambda c: needle in c["title"].casefold()
        if op in ("=", "!="):
            eq = self._equals(field, [value])
            return eq if op == "=" else (lambda c: not eq(c))
        if field == "id":
            try:
                n = int(value)
            except ValueError:
                raise CqlError(self.cql) from None
            cmp = {">": n.__lt__, ">=": n.__le__, "<": n.__gt__, "<=": n.__ge__}[op]
            return lambda c: cmp(int(c["id"]))
        raise CqlError(self.cql)

    def _equals(self, field: str, values: list[str]) -> Predicate:
        if field == "type":
            types = {v.lower() for v in values}
            return lambda c: c["type"] in types
        if field == "space":
            keys = {v.upper() for v in values}
            return lambda c: c["space"] in keys
        if field == "title":
            titles = set(values)
            return lambda c: c["title"] in titles
        ids = set(values)
        if field == "id":
            return lambda c: c["id"] in ids
        if field == "ancestor":
            return lambda c: c["type"] == "page" and bool(ids & set(c["ancestors"]))
        if field == "parent":
            return lambda c: c["type"] == "page" and bool(c["ancestors"]) and c["ancestors"][-1] in ids
        # container: the content an attachment hangs on
        return lambda c: c["container"] in ids

    def _date(self, field: str, op: str, text: str) -> Predicate:
        if op == "~":
            raise CqlError(self.cql)
        tz = self.tz
        when, date_only = parse_date(text, tz)
        if date_only and op in ("=", "!="):
            day_end = when + dt.timedelta(days=1)

            def in_day(c: dict[str, Any]) -> bool:
                return when <= _minute(c[field], tz) < day_end

            return in_day if op == "=" else (lambda c: not in_day(c))
        ops: dict[str, Callable[[dt.datetime], bool]] = {
            "=": lambda m: m == when,
            "!=": lambda m: m != when,
            ">": lambda m: m > when,
            ">=": lambda m: m >= when,
            "<": lambda m: m < when,
            "<=": lambda m: m <= when,
        }
        test = ops[op]
        return lambda c: test(_minute(c[field], tz))


def parse(cql: str, tz: dt.tzinfo) -> Query:
    if not cql or not cql.strip():
        raise CqlError(cql)
    return _Parser(cql, tz).parse()
