"""The support check stems words on the event loop and, for a sentence the embedder checks, on a
worker thread (``asyncio.to_thread``) at the same time: snowballstemmer's stemmers keep the word
being stemmed in the instance, so one shared between threads mixes two words up."""

from __future__ import annotations

import random
import sys
import threading

import snowballstemmer

from conversations.support import word_stem


def _words(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    stems = ["работ", "отпуск", "сотрудник", "заявлен", "расход", "командировк", "оклад", "премир"]
    endings = ["а", "ами", "ах", "ов", "ой", "ого", "ому", "ыми", "ения", "ениям", "ующий", "ующими"]
    return [
        f"{rng.choice(stems)}{''.join(rng.choices('абвгдеклмнопрст', k=rng.randint(1, 6)))}{rng.choice(endings)}"
        for _ in range(n)
    ]


def test_words_stemmed_on_several_threads_at_once_are_stemmed_as_on_one():
    words = sorted(set(_words(1, 40_000)))
    reference = snowballstemmer.stemmer("russian")
    expected = {word: reference.stemWord(word) for word in words}
    word_stem.cache_clear()
    got: dict[str, str] = {}
    errors: list[BaseException] = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can
    try:

        def stem_all(part: list[str]) -> None:
            try:
                for word in part:
                    got[word] = word_stem(word)
            except BaseException as exc:  # noqa: BLE001 — reported below
                errors.append(exc)

        threads = [threading.Thread(target=stem_all, args=(words[i::4],)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
        word_stem.cache_clear()
    assert not errors
    wrong = {word: (got[word], expected[word]) for word in words if got[word] != expected[word]}
    assert not wrong, list(wrong.items())[:5]
