"""Calibrating the relevance floor of an embedding model over the corpus in the store.

The floor (``agent_models.options.min_similarity`` of the default embedding model; without it the
documented default of its provider, ``knowledge.search.embedding.DEFAULT_MIN_SIMILARITY``) drops vector neighbours
below it. A question with no lexical match whose neighbours are all under the floor gets no
candidates, so the Query Engine answers «не нашёл» itself, without a second model round.

``relevance_calibrate`` measures, per question, whether the lexical side matches anything (any one
of its lexemes, the widest level of the search) and the best cosine similarity of any chunk. A
floor *separates* on-topic from off-topic questions when every on-topic question reaches it and
every off-topic question without a lexical match stays under it. ``manage.py relevance_floor``
prints the table and the suggested value (the middle of the separating interval).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection

from knowledge.models import TEXT_SEARCH_CONFIG
from knowledge.search.embedding import embed_query, embedding_config
from knowledge.search.lexical import query_lexemes, tsquery_literal
from knowledge.search.vector import vector_literal

# Questions about the demo corpus (knowledge/demo_corpus) and general-knowledge questions it
# cannot answer.
ON_TOPIC = (
    "Сколько дней отпуска положено?",
    "Как подключиться к VPN?",
    "Когда выплачивают премии?",
    "Как оформить командировку?",
    "Как сменить пароль?",
    "Какой бюджет ИТ на 2026 год?",
    "Как оформить больничный?",
    "Что входит в ДМС?",
)
OFF_TOPIC = (
    "Какая столица Франции?",
    "Кто написал «Войну и мир»?",
    "Сколько будет дважды два?",
    "Какая погода завтра в Париже?",
    "Рецепт пиццы",
    "Кто выиграл чемпионат мира по футболу?",
    "Расстояние до Луны",
    "Сколько спутников у Юпитера?",
)

_ANY_LEXEME_SQL = """
SELECT EXISTS (SELECT 1 FROM knowledge_chunks WHERE tsv @@ to_tsquery(%(config)s, %(q)s))
"""
_BEST_SIMILARITY_SQL = """
SELECT max(1 - (embedding <=> %(vec)s::vector)) FROM knowledge_chunks WHERE embedding IS NOT NULL
"""


@dataclass(frozen=True)
class CalibrationRow:
    question: str
    on_topic: bool
    lexical: bool
    similarity: float | None


@dataclass(frozen=True)
class Calibration:
    model: str
    floor_in_use: float | None
    rows: tuple[CalibrationRow, ...]

    @property
    def on_topic_min(self) -> float | None:
        values = [r.similarity for r in self.rows if r.on_topic and r.similarity is not None]
        return min(values) if values else None

    @property
    def off_topic_max(self) -> float | None:
        """Best similarity among the off-topic questions the floor has to stop (no lexical match)."""
        values = [r.similarity for r in self.rows if not r.on_topic and not r.lexical and r.similarity is not None]
        return max(values) if values else None

    @property
    def suggested(self) -> float | None:
        low, high = self.off_topic_max, self.on_topic_min
        if low is None or high is None or low >= high:
            return None
        return round((low + high) / 2, 3)

    def separates(self, floor: float) -> bool:
        on_ok = all(r.similarity is not None and r.similarity >= floor for r in self.rows if r.on_topic)
        off_ok = all(
            r.similarity is None or r.similarity < floor for r in self.rows if not r.on_topic and not r.lexical
        )
        return on_ok and off_ok


def relevance_calibrate(*, on_topic: Sequence[str] = ON_TOPIC, off_topic: Sequence[str] = OFF_TOPIC) -> Calibration:
    """Measure the questions against the store with the default embedding model (must exist)."""
    config = embedding_config()
    if config is None:
        raise ValueError("no default embedding model: the vector side (and its floor) is off")
    rows = []
    with connection.cursor() as cursor:
        for question, topical in [(q, True) for q in on_topic] + [(q, False) for q in off_topic]:
            lexemes = query_lexemes(cursor, question)
            lexical = False
            if lexemes:
                cursor.execute(
                    _ANY_LEXEME_SQL,
                    {"config": TEXT_SEARCH_CONFIG, "q": " | ".join(tsquery_literal(x) for x in lexemes)},
                )
                lexical = bool(cursor.fetchone()[0])
            vector = embed_query(config, question)
            similarity = None
            if vector is not None:
                cursor.execute(_BEST_SIMILARITY_SQL, {"vec": vector_literal(vector)})
                value = cursor.fetchone()[0]
                similarity = round(float(value), 4) if value is not None else None
            rows.append(CalibrationRow(question, topical, lexical, similarity))
    floor = config.min_similarity if config.min_similarity > -1 else None
    return Calibration(model=config.name, floor_in_use=floor, rows=tuple(rows))
