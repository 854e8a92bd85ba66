"""Small Russian/English text helpers for the builtin model and the hash embedder.

Deliberately crude and deterministic: word tokens, a stop list, and stemming by stripping one
common inflectional ending and truncating to a 5-character prefix (``отпуска``, ``отпуском`` and
``отпуск`` all become ``отпус``; ``prices`` and ``pricing`` become ``pric``).
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_BULLET = re.compile(r"^\s*(?:[-*•–]|\d{1,2}[.)])\s+")
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)

STEM_LENGTH = 5
# Longest first, so "ами" wins over "и"; a stem keeps at least 3 letters.
_ENDINGS = tuple(
    sorted(
        [
            "ами",
            "ями",
            "ого",
            "его",
            "ому",
            "ему",
            "ыми",
            "ими",
            "ах",
            "ях",
            "ам",
            "ям",
            "ом",
            "ем",
            "ой",
            "ей",
            "ий",
            "ый",
            "ая",
            "яя",
            "ое",
            "ее",
            "ую",
            "юю",
            "ов",
            "ев",
            "ы",
            "и",
            "а",
            "я",
            "о",
            "е",
            "у",
            "ю",
            "ь",
            "й",
            "ing",
            "ed",
            "es",
            "s",
            "e",
        ],
        key=len,
        reverse=True,
    )
)

STOP_WORDS = frozenset(
    [
        "а",
        "и",
        "в",
        "во",
        "на",
        "с",
        "со",
        "по",
        "о",
        "об",
        "обо",
        "у",
        "к",
        "ко",
        "из",
        "за",
        "от",
        "до",
        "для",
        "при",
        "под",
        "над",
        "про",
        "без",
        "через",
        "ли",
        "же",
        "бы",
        "ль",
        "но",
        "или",
        "либо",
        "не",
        "ни",
        "да",
        "нет",
        "то",
        "это",
        "этот",
        "эта",
        "эти",
        "этого",
        "этой",
        "этом",
        "этих",
        "тот",
        "та",
        "те",
        "того",
        "той",
        "том",
        "я",
        "мы",
        "вы",
        "ты",
        "он",
        "она",
        "оно",
        "они",
        "мне",
        "меня",
        "мной",
        "нам",
        "нас",
        "вам",
        "вас",
        "тебе",
        "тебя",
        "его",
        "её",
        "ее",
        "их",
        "им",
        "ему",
        "ей",
        "ней",
        "него",
        "нему",
        "ним",
        "них",
        "нём",
        "нем",
        "мой",
        "моя",
        "мои",
        "наш",
        "наша",
        "наши",
        "ваш",
        "ваша",
        "ваши",
        "свой",
        "своя",
        "свои",
        "что",
        "кто",
        "где",
        "когда",
        "как",
        "какой",
        "какого",
        "каком",
        "какому",
        "какими",
        "каких",
        "каким",
        "какую",
        "скольких",
        "какая",
        "какое",
        "какие",
        "каков",
        "какова",
        "каково",
        "сколько",
        "почему",
        "зачем",
        "куда",
        "откуда",
        "чей",
        "чья",
        "чьё",
        "чье",
        "чьи",
        "ли",
        "есть",
        "был",
        "была",
        "было",
        "были",
        "быть",
        "будет",
        "будут",
        "можно",
        "нужно",
        "надо",
        "такой",
        "такая",
        "такое",
        "такие",
        "так",
        "там",
        "тут",
        "здесь",
        "вот",
        "уже",
        "ещё",
        "еще",
        "тоже",
        "также",
        "только",
        "очень",
        "все",
        "всё",
        "весь",
        "вся",
        "пожалуйста",
        "скажи",
        "скажите",
        "расскажи",
        "расскажите",
        "подскажи",
        "подскажите",
        "объясни",
        "объясните",
        "покажи",
        "покажите",
        "найди",
        "найдите",
        "опиши",
        "опишите",
        "перечисли",
        "перечислите",
        "дай",
        "дайте",
        "хочу",
        "узнать",
        "the",
        "a",
        "an",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "about",
        "into",
        "over",
        "under",
        "and",
        "or",
        "but",
        "not",
        "no",
        "nor",
        "so",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "done",
        "have",
        "has",
        "had",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "i",
        "me",
        "my",
        "we",
        "us",
        "our",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "it",
        "its",
        "they",
        "them",
        "their",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "who",
        "whom",
        "whose",
        "where",
        "when",
        "why",
        "how",
        "which",
        "please",
        "tell",
        "explain",
        "show",
        "find",
        "describe",
        "give",
        "know",
        "need",
        "want",
        "also",
        "too",
        "just",
        "very",
        "any",
        "some",
        "all",
    ]
)


def normalize(text: str) -> str:
    return text.lower().replace("ё", "е")


def words(text: str) -> list[str]:
    """Lower-cased word tokens, ``ё`` folded to ``е``."""
    return _WORD.findall(normalize(text))


def stem(word: str) -> str:
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            word = word[: -len(ending)]
            break
    return word[:STEM_LENGTH]


def content_words(text: str) -> list[str]:
    """Word tokens that carry meaning: not stop words, not single letters (digits are kept)."""
    return [w for w in words(text) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]


# The imperfective of the «брать» family and a few others inserts a vowel into the root
# («выбрать» / «выбирает», «собрать» / «собирают», «вызвать» / «вызывает», «выслать» / «высылает»):
# the two aspects of one verb are one word to a reader, yet their 5-letter stems differ.
_ASPECT_ROOTS = (
    (re.compile(r"(?<=\w)бира"), "бра"),
    (re.compile(r"(?<=\w)зыва"), "зва"),
    (re.compile(r"(?<=\w)сыла"), "сла"),
)


def match_stem(word: str) -> str:
    """``stem`` with both aspects of a verb folded together: what the builtin model matches on."""
    for pattern, root in _ASPECT_ROOTS:
        word = pattern.sub(root, word)
    return stem(word)


# What a sentence says without the question's words: «не короче 12 символов» is a minimum length,
# «не более 5» a maximum. Each phrase adds the stems of the words a question asks it with
# («Какой минимальной длины…», «максимальный размер»), so the two meet.
_IMPLIED = (
    (
        re.compile(
            r"(?<!\w)(?:не|no)\s+(?:короче|меньше|менее|ниже|раньше|реже|fewer|less|shorter)(?!\w)"
            r"|(?<!\w)(?:как\s+)?минимум(?!\w)|(?<!\w)at\s+least(?!\w)"
        ),
        ("минимальный", "minimum"),
    ),
    (
        re.compile(
            r"(?<!\w)(?:не|no)\s+(?:длиннее|больше|более|выше|позже|чаще|longer|more|later)(?!\w)"
            r"|(?<!\w)(?:как\s+)?максимум(?!\w)|(?<!\w)at\s+most(?!\w)|(?<!\w)не\s+превыша\w*"
        ),
        ("максимальный", "maximum"),
    ),
    (re.compile(r"(?<!\w)(?:короче|длиннее|коротк\w*|длинн\w*|shorter|longer)(?!\w)"), ("длина", "length")),
)


def implied_stems(text: str) -> set[str]:
    """Stems of what ``text`` says in other words (``_IMPLIED``): a minimum, a maximum, a length."""
    folded = normalize(text)
    return {match_stem(w) for pattern, implied in _IMPLIED if pattern.search(folded) for w in implied}


def content_stems(text: str) -> set[str]:
    """The stems of ``text``'s content words (aspects folded, ``match_stem``), and of what its
    phrases imply (``implied_stems``)."""
    return {match_stem(w) for w in content_words(text)} | implied_stems(text)


# A sentence ends after .!?… followed by whitespace and the next sentence's first character.
_SENTENCE_CUT = re.compile(r"(?<=[.!?…])[\"»”')]*\s+(?=[\"«“(\[]?[A-ZА-ЯЁ0-9])")
# Words a dot follows without ending the sentence: «см. [4]», «т. е.», «г. Москва», «e.g.».
_ABBREVIATIONS = frozenset(
    ["см", "т", "е", "д", "г", "гг", "др", "пр", "стр", "рис", "напр", "ул", "им", "тел", "eg", "ie", "etc", "vs", "no"]
)
_BLOCK_LINE = re.compile(r"^\s*(?:[-*•–]|\d{1,2}[.)]|#{1,6}|\|)\s*")


def _paragraph_lines(text: str) -> list[str]:
    """Lines joined where a line break falls inside a sentence: a line continues the previous
    one unless that one ended a sentence (.!?…:) or either is a list item, heading or table row."""
    out: list[str] = []
    glue = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            glue = False
            continue
        block = bool(_BLOCK_LINE.match(raw))
        if glue and not block and out:
            out[-1] = f"{out[-1]} {line}"
        else:
            out.append(_BULLET.sub("", line) if block else line)
        glue = not block and not line.rstrip("\"»”')*_").endswith((".", "!", "?", "…", ":"))
        if block and not line.startswith(("#", "|")):
            glue = not line.rstrip().endswith((".", "!", "?", "…", ":"))  # a list item may wrap too
    return out


def split_sentences(text: str) -> list[str]:
    """Sentences of a text, verbatim: a line break inside a sentence is not an end, an
    abbreviation's dot («см.», «т. е.», «г.») is not an end; list bullets are dropped from the front."""
    sentences = []
    for line in _paragraph_lines(text):
        start = 0
        for cut in _SENTENCE_CUT.finditer(line):
            head = line[start : cut.start()]
            last = re.search(r"([^\W\d_]+)\.$", head.rstrip("\"»”')"))
            if last and (_fold_abbreviation(last.group(1)) in _ABBREVIATIONS or len(last.group(1)) == 1):
                continue
            piece = line[start : cut.start()].strip()
            if _WORD.search(piece):
                sentences.append(piece)
            start = cut.end()
        piece = line[start:].strip()
        if _WORD.search(piece):
            sentences.append(piece)
    return sentences


def _fold_abbreviation(word: str) -> str:
    return word.lower().replace("ё", "е")


def is_russian(text: str) -> bool:
    return bool(_CYRILLIC.search(text))
