"""Jira's text search (the JQL ``~`` operator) as Lucene's classic query parser does it.

The value of ``summary ~ "..."`` is a Lucene query, not a string to look for:

* terms are analysed like the index: split on non-word characters, case-folded, English stop words
  dropped, simple English stemming (``flags`` → ``flag``, ``running`` → ``run``);
* several terms without an operator are joined by AND (Jira's documented default);
* ``+term`` must, ``-term`` / ``!term`` / ``NOT term`` must not, ``AND`` / ``&&``, ``OR`` / ``||``,
  ``( … )`` groups, ``"a phrase"`` (the terms adjacent, in order), ``te?t`` / ``win*`` wildcards (not
  leading), ``term~`` / ``term~2`` fuzzy and ``term^3`` boosts (accepted, no effect on the match);
* ``\\`` escapes the next character; the characters ``+ - & | ! ( ) { } [ ] ^ ~ * ? \\ :`` anywhere else
  in a way the grammar does not expect (``C++``, ``(phase 2)?``, a dangling ``-``, ``a:b``, ``[x]``)
  make the query invalid — Jira's 400;
* a query of stop words only matches nothing (an empty Lucene query).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

# Lucene's ENGLISH_STOP_WORDS_SET, the list Jira's English analyser uses.
STOP_WORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not"]
    + ["of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was"]
    + ["will", "with"]
)
SPECIAL = set('+-&|!(){}[]^~*?\\:"')
_WORD = re.compile(r"\w+")


class TextQueryError(ValueError):
    pass


def stem(word: str) -> str:
    """A light English stemmer (Latin words only; others are kept as they are)."""
    if not word.isascii() or len(word) <= 3:
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not (suffix == "s" and word.endswith("ss")):
            word = word[: len(word) - len(suffix)] + repl
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouslz":  # running → runn → run
        word = word[:-1]
    if len(word) > 4 and word.endswith("e"):  # remove / removed / removes → remov
        word = word[:-1]
    return word


def raw_tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall((text or "").casefold()) if w not in STOP_WORDS]


def analyse(text: str) -> list[str]:
    return [stem(w) for w in raw_tokens(text)]


@dataclass
class Doc:
    terms: list[str]
    raw: list[str]

    @classmethod
    def of(cls, text: str) -> Doc:
        raw = raw_tokens(text)
        return cls([stem(w) for w in raw], raw)


Matcher = Callable[[Doc], bool]
_NOTHING: Matcher = lambda doc: False  # noqa: E731


def _phrase(terms: list[str]) -> Matcher:
    if not terms:
        return _NOTHING
    n = len(terms)
    return lambda doc: any(doc.terms[i : i + n] == terms for i in range(len(doc.terms) - n + 1))


def _term(text: str) -> Matcher | None:
    terms = analyse(text)
    if not terms:
        return None  # a stop word, an emoji, a lone escaped operator: no clause at all, as in Lucene
    return _phrase(terms) if len(terms) > 1 else _single(terms)


def _single(terms: list[str]) -> Matcher:
    if not terms:
        return _NOTHING
    t = terms[0]
    return lambda doc: t in doc.terms


def _wildcard(pattern: str) -> Matcher:
    if pattern[0] in "*?":
        raise TextQueryError("leading wildcard")
    pat = pattern.casefold()
    return lambda doc: any(fnmatch.fnmatchcase(w, pat) for w in doc.raw)


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def fail(self) -> None:
        raise TextQueryError(self.s)

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def at_end(self) -> bool:
        self.ws()
        return self.i >= len(self.s)

    def peek_word(self, word: str) -> bool:
        self.ws()
        end = self.i + len(word)
        return self.s.startswith(word, self.i) and (end >= len(self.s) or self.s[end].isspace() or self.s[end] in '("')

    def query(self, depth: int = 0) -> tuple[list[Matcher], list[Matcher], list[Matcher]]:
        """(must, must_not, should) of one level; returns at ``)`` or the end."""
        must: list[Matcher] = []
        must_not: list[Matcher] = []
        should: list[Matcher] = []
        groups: list[list[tuple[str, Matcher]]] = [[]]  # OR-separated groups of (occur, matcher)
        pending_and = False
        while True:
            if self.at_end():
                if depth:
                    self.fail()
                break
            if self.s[self.i] == ")":
                if not depth:
                    self.fail()
                break
            if self.s.startswith("&&", self.i) or self.peek_word("AND"):
                self.i += 2 if self.s.startswith("&&", self.i) else 3
                if not groups[-1] or pending_and:
                    self.fail()
                pending_and = True
                continue
            if self.s.startswith("||", self.i) or self.peek_word("OR"):
                self.i += 2 if self.s.startswith("||", self.i) else 2
                if not groups[-1] or pending_and:
                    self.fail()
                groups.append([])
                continue
            occur = "must"
            c = self.s[self.i]
            if c in "+-!" or self.peek_word("NOT"):
                occur = "must" if c == "+" else "not"
                self.i += 3 if self.peek_word("NOT") else 1
                if self.i >= len(self.s) or self.s[self.i].isspace() or self.s[self.i] in ")+-!&|":
                    self.fail()
            matcher = self.clause(depth)
            if matcher is not None:
                groups[-1].append((occur, matcher))
            elif occur == "must" and not groups[-1]:
                groups[-1].append(("skip", _NOTHING))  # keeps `the AND x` well-formed
            pending_and = False
        if pending_and or (len(groups) > 1 and not groups[-1]):
            self.fail()
        if len(groups) == 1:
            for occur, m in groups[0]:
                if occur != "skip":
                    (must if occur == "must" else must_not).append(m)
        else:
            for g in groups:
                should.append(_combine([m for o, m in g if o == "must"], [m for o, m in g if o == "not"], []))
        return must, must_not, should

    def clause(self, depth: int) -> Matcher | None:
        c = self.s[self.i]
        inner: Matcher | None
        if c == "(":
            self.i += 1
            inner = _combine(*self.query(depth + 1))
            self.i += 1  # the ')'
        elif c == '"':
            end = self.i + 1
            buf = []
            while end < len(self.s) and self.s[end] != '"':
                if self.s[end] == "\\" and end + 1 < len(self.s):
                    end += 1
                buf.append(self.s[end])
                end += 1
            if end >= len(self.s):
                self.fail()
            self.i = end + 1
            phrase = analyse("".join(buf))
            inner = _phrase(phrase) if phrase else None
        else:
            buf = []
            wild = False
            while self.i < len(self.s) and not self.s[self.i].isspace():
                ch = self.s[self.i]
                if ch == "\\":
                    if self.i + 1 >= len(self.s):
                        self.fail()
                    buf.append(self.s[self.i + 1])
                    self.i += 2
                    continue
                if ch in "*?":
                    wild = True
                elif ch in "~^)":
                    break
                elif ch in SPECIAL:
                    self.fail()
                buf.append(ch)
                self.i += 1
            if not buf:
                self.fail()
            word = "".join(buf)
            inner = _wildcard(word) if wild else _term(word)
        self.modifiers()
        return inner

    def modifiers(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in "~^":
            mark = self.s[self.i]
            self.i += 1
            m = re.match(r"\d+(\.\d+)?", self.s[self.i :])
            if m:
                self.i += m.end()
            elif mark == "^":
                self.fail()
        if self.i < len(self.s) and not self.s[self.i].isspace() and self.s[self.i] != ")":
            self.fail()


def _combine(must: list[Matcher], must_not: list[Matcher], should: list[Matcher]) -> Matcher:
    if not must and not should:
        return _NOTHING  # a purely negative (or empty) Lucene query matches nothing
    return (
        lambda doc: all(m(doc) for m in must)
        and not any(m(doc) for m in must_not)
        and (not should or any(m(doc) for m in should))
    )


def compile_query(text: str) -> Matcher:
    """``text`` (the JQL string's value) → a predicate over a ``Doc``; ``TextQueryError`` if malformed."""
    parser = _Parser(text)
    return _combine(*parser.query())
