"""The support check of a grounded answer (QE-9): which sentences may reach the user.

Pure and deterministic: no database, no model. On a grounding turn round 2's text is cut into
sentences as it streams (``SentenceSplitter``); each sentence is released to the client only when
``check_sentence`` says it is supported, and a sentence that is not is neither streamed nor stored
(the trace keeps it with the reason). Conversation turns are never checked.

A sentence is supported when all of these hold:

1. **marker** — it carries at least one ``[N]`` marker of a packed source (``no_marker`` when it
   carries none, ``unknown_marker`` when its markers point outside the packed set). The *cited
   text* is the text of every packed source it cites. A Markdown heading (``## …``) needs no
   marker: its cited text is the whole packed context.
2. **facts** — everything it asserts as a fact is in the cited text:
   numbers, dates and amounts (``numbers``: «1,35» = «1.35», «100 000» = «100000», leading zeros
   ignored), proper names (``names``: a capitalised word that does not open the sentence, an
   all-caps word, a word mixing letters and digits, a Latin word in a Russian sentence) and quoted
   terms (``quotes``: every word inside «…», "…" or “…”).
3. **overlap** — at least ``OVERLAP_THRESHOLD`` of its content words (stop words dropped) are in
   the cited text (``overlap``).
4. **links** — it shows no image (``image``: markdown ``![…](…)`` or ``<img``) and links only to
   the url of a packed source (``outside_link``); an injected chunk cannot make the answer fetch
   or point to an outside host.

Words are compared case-insensitively (``ё`` = ``е``) through the Snowball stemmer — the same
algorithm PostgreSQL's ``russian`` text search configuration (the Knowledge Store's lexical side)
applies: Russian for Cyrillic words, English for Latin ones. Two stems also match when one is a
prefix of the other and the shorter has at least 4 letters (inflections Snowball leaves apart:
«финанс»/«финансов»), or when both are at most 4 letters and differ only in the last one
(«дне»/«дня»).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import snowballstemmer

from achilles.llm import STOP_WORDS

OVERLAP_THRESHOLD = 0.5

_MARKER = re.compile(r"\[(\d{1,3})\]")
_WORD = re.compile(r"[^\W_]+(?:[-'’][^\W_]+)*", re.UNICODE)
_NUMBER = re.compile(r"\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)*")
_QUOTED = re.compile(r"«([^»]+)»|\"([^\"]+)\"|“([^”]+)”|„([^“”]+)[“”]")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|<\s*img\b", re.IGNORECASE)
_URL = re.compile(r"https?://[^\s)\]>\"'«»]+", re.IGNORECASE)
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_LATIN = re.compile(r"[a-z]", re.IGNORECASE)
_HEADING = re.compile(r"^#{1,6}\s+\S")
_MARKUP_PREFIX = re.compile(r"^[\s>#*_`~|-]*(?:\d{1,3}[.)]\s+)?[\s*_`~]*")

_RUSSIAN = snowballstemmer.stemmer("russian")
_ENGLISH = snowballstemmer.stemmer("english")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one sentence: ``reason`` is None when it is supported."""

    sentence: str
    reason: str | None
    markers: tuple[int, ...] = ()
    missing: tuple[str, ...] = ()
    overlap: float | None = None

    @property
    def supported(self) -> bool:
        return self.reason is None

    def as_trace(self) -> dict:
        row: dict = {"sentence": self.sentence, "reason": self.reason, "markers": list(self.markers)}
        if self.missing:
            row["missing"] = list(self.missing)
        if self.overlap is not None:
            row["overlap"] = round(self.overlap, 3)
        return row


# --- normalisation ------------------------------------------------------------------------------


def _fold(text: str) -> str:
    return text.lower().replace("ё", "е")


@lru_cache(maxsize=65536)
def word_stem(word: str) -> str:
    """Snowball stem of one lower-cased word (Russian for Cyrillic, English otherwise)."""
    word = _fold(word)
    return (_RUSSIAN if _CYRILLIC.search(word) else _ENGLISH).stemWord(word)


def _stems_match(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) >= 4 and long_.startswith(short):
        return True
    return len(a) == len(b) and len(a) <= 4 and len(a) >= 2 and a[:-1] == b[:-1]


def normalize_number(token: str) -> str:
    """«1,35» → «1.35», «100 000» → «100000», «007» → «7»."""
    token = re.sub(r"[ \u00a0\u202f]", "", token).replace(",", ".")
    head, dot, tail = token.partition(".")
    return (head.lstrip("0") or "0") + dot + tail


def numbers_in(text: str) -> set[str]:
    return {normalize_number(m.group(0)) for m in _NUMBER.finditer(_MARKER.sub(" ", text))}


@dataclass
class _Cited:
    """What the cited text offers: its number tokens, word stems and lower-cased text."""

    numbers: set[str]
    stems: set[str]
    by_prefix: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, text: str) -> _Cited:
        stems = {word_stem(part) for w in _WORD.findall(text) for part in _parts(w)}
        by_prefix: dict[str, set[str]] = {}
        for s in stems:
            by_prefix.setdefault(s[:2], set()).add(s)
        return cls(numbers=numbers_in(text), stems=stems, by_prefix=by_prefix)

    def has_word(self, word: str) -> bool:
        if word.isdigit():
            return normalize_number(word) in self.numbers
        return all(self._has_stem(word_stem(part)) for part in _parts(word))

    def _has_stem(self, stem: str) -> bool:
        if stem in self.stems:
            return True
        return any(_stems_match(stem, s) for s in self.by_prefix.get(stem[:2], ()))


@lru_cache(maxsize=128)
def _cited(text: str) -> _Cited:
    """The cited text's index, built once per text: an answer's sentences mostly cite the same
    sources, and indexing them again for every sentence was most of the check's cost. Callers
    only read it."""
    return _Cited.of(text)


def _parts(word: str) -> list[str]:
    # «Wi-Fi», «achilles-guest»: every part must be found.
    return [p for p in re.split(r"[-'’]", _fold(word)) if p]


# --- the check ----------------------------------------------------------------------------------


def check_sentence(
    sentence: str, sources: Mapping[int, str], *, source_urls: Iterable[str] = (), threshold: float = OVERLAP_THRESHOLD
) -> Verdict:
    """Is ``sentence`` supported by the packed sources it cites? ``sources`` maps marker → text."""
    sentence = sentence.strip()
    markers = tuple(dict.fromkeys(int(m) for m in _MARKER.findall(sentence)))
    if _IMAGE.search(sentence):
        return Verdict(sentence, "image", markers)
    allowed = {u.rstrip("/.,") for u in source_urls if u}
    outside = [u for u in _URL.findall(sentence) if u.rstrip("/.,") not in allowed]
    if outside:
        return Verdict(sentence, "outside_link", markers, tuple(outside))
    heading = bool(_HEADING.match(sentence))
    if not markers and not heading:
        return Verdict(sentence, "no_marker")
    # A Markdown heading names a topic, asserts nothing: it needs no marker, only support by the
    # packed context as a whole.
    cited_markers = [m for m in markers if m in sources] if markers else list(sources)
    if not cited_markers:
        return Verdict(sentence, "unknown_marker", markers)
    cited = _cited("\n".join(sources[m] for m in cited_markers))
    body = _URL.sub(" ", _MARKER.sub(" ", sentence))  # an allowed link asserts nothing by itself

    missing_numbers = tuple(sorted(n for n in numbers_in(body) if n not in cited.numbers))
    if missing_numbers:
        return Verdict(sentence, "numbers", markers, missing_numbers)
    missing_quotes = tuple(q for q in _quoted_terms(body) if not all(cited.has_word(w) for w in _WORD.findall(q)))
    if missing_quotes:
        return Verdict(sentence, "quotes", markers, missing_quotes)
    missing_names = tuple(n for n in proper_names(body) if not cited.has_word(n))
    if missing_names:
        return Verdict(sentence, "names", markers, missing_names)

    content = [w for w in _WORD.findall(_NUMBER.sub(" ", body)) if _is_content(w)]
    if not content:
        return Verdict(sentence, None, markers, overlap=None)
    found = sum(1 for w in content if cited.has_word(w))
    overlap = found / len(content)
    if overlap < threshold:
        missing = tuple(w for w in content if not cited.has_word(w))
        return Verdict(sentence, "overlap", markers, missing, overlap)
    return Verdict(sentence, None, markers, overlap=overlap)


def _is_content(word: str) -> bool:
    folded = _fold(word)
    return folded not in STOP_WORDS and len(folded) > 1


def _quoted_terms(text: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]


def proper_names(text: str) -> list[str]:
    """Words a sentence asserts as names: capitalised but not opening the sentence, all-caps,
    letters mixed with digits, or Latin words inside a Russian sentence."""
    body = _MARKUP_PREFIX.sub("", _URL.sub(" ", text), count=1)
    russian = bool(_CYRILLIC.search(body))
    names = []
    for i, match in enumerate(_WORD.finditer(body)):
        word = match.group(0)
        letters = [c for c in word if c.isalpha()]
        if not letters:
            continue
        opening = i == 0 or _opens_sentence(body, match.start())
        is_name = (
            (word[0].isupper() and not opening)
            or (len(letters) > 1 and all(c.isupper() for c in letters))
            or any(c.isdigit() for c in word)
            or (russian and bool(_LATIN.search(word)) and not _CYRILLIC.search(word) and len(word) > 1)
        )
        if is_name:
            names.append(word)
    return names


def _opens_sentence(text: str, at: int) -> bool:
    # After a colon, a dash or an opening quote a capital letter is not a name by itself.
    before = text[:at].rstrip(" *_`")
    return not before or before[-1] in '.!?…:«"“(—–-\n'


# --- cutting a stream into sentences --------------------------------------------------------------

# A sentence ends after .!?… (and closing quotes/emphasis) plus the markers that follow it, where
# whitespace is followed by the next sentence's first character (not a marker, not lower case);
# or at a line break followed by more text.
_END = re.compile(r"[.!?…]+[\"»”')*_]*((?:[ \t]*\[\d{1,3}\])*)(?=[ \t]*\n|[ \t]+[^\s\[a-zа-яё])")
_LINE = re.compile(r"\n(?=\s*\S)")
_CUT_CHAR = re.compile(r"[.!?…\n]")  # every cut follows one of these (``_END``, ``_LINE``)
_ABBREVIATION = re.compile(r"(?:^|[\s(«\"])[a-zа-яё]{1,2}$|(?:^|\n)[ \t]*\d{1,3}$")


class SentenceSplitter:
    """Incremental: ``feed`` text deltas, get complete sentences back (verbatim, each with the
    whitespace that preceded it); ``flush`` returns the rest at the end of the stream. A sentence
    is complete only once the next one has begun, so its trailing markers are never cut off."""

    def __init__(self) -> None:
        self.buffer = ""
        self._armed = False  # the buffer holds a character a cut can follow (.!?… or a line break)

    def feed(self, text: str) -> list[str]:
        self.buffer += text
        # Most deltas are words: without a possible end in the buffer there is nothing to scan
        # (scanning the whole buffer on every token made the check cost grow with the sentence).
        if not self._armed:
            if not _CUT_CHAR.search(text):
                return []
            self._armed = True
        out = []
        while True:
            cut = self._next_cut()
            if cut is None:
                return out
            out.append(self.buffer[:cut])
            self.buffer = self.buffer[cut:]
            self._armed = bool(_CUT_CHAR.search(self.buffer))

    def flush(self) -> list[str]:
        rest, self.buffer, self._armed = self.buffer, "", False
        return [rest] if rest.strip() else []

    def _next_cut(self) -> int | None:
        start = len(self.buffer) - len(self.buffer.lstrip())
        cuts = []
        for match in _END.finditer(self.buffer, start):
            head = self.buffer[: match.start()]
            # «г. Москва», «т. е.», a numbered list's «1. » are not sentence ends.
            # Markers after the dot always end a sentence; abbreviations are lower case.
            if match.group(0)[0] == "." and not match.group(1) and _ABBREVIATION.search(head):
                continue
            cuts.append(match.end())
            break
        line = _LINE.search(self.buffer, start)
        if line is not None:
            cuts.append(line.start())
        cuts = [c for c in cuts if self.buffer[start:c].strip()]
        return min(cuts) if cuts else None


def split_sentences(text: str) -> list[str]:
    """The same cut as the stream's, over a whole text."""
    splitter = SentenceSplitter()
    return splitter.feed(text) + splitter.flush()


@dataclass
class GroundingGate:
    """Releases the supported sentences of a streamed answer; keeps the rejected ones with why."""

    sources: Mapping[int, str]
    source_urls: Sequence[str] = ()
    threshold: float = OVERLAP_THRESHOLD
    released: list[str] = field(default_factory=list)
    rejected: list[Verdict] = field(default_factory=list)
    _splitter: SentenceSplitter = field(default_factory=SentenceSplitter)

    def feed(self, text: str) -> list[str]:
        return self._judge(self._splitter.feed(text))

    def flush(self) -> list[str]:
        return self._judge(self._splitter.flush())

    @property
    def text(self) -> str:
        return "".join(self.released)

    def _judge(self, pieces: list[str]) -> list[str]:
        out = []
        for piece in pieces:
            if not _WORD.search(piece):
                continue  # decoration without words («---», «**»): nothing to support, nothing to show
            verdict = check_sentence(piece, self.sources, source_urls=self.source_urls, threshold=self.threshold)
            if not verdict.supported:
                self.rejected.append(verdict)
                continue
            if not self.released:
                piece = piece.lstrip()
            self.released.append(piece)
            out.append(piece)
        return out
