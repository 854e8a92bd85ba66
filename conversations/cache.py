"""The cache gate (QE-6): exact standalone query + identity → the KS result, in Redis with a TTL.

A hit skips the KS call altogether; another identity never shares an entry (the key carries
``identity.cache_key()``); near-duplicate queries are different keys (exact, not semantic). The key
also carries the store's content generation (``knowledge.facade.generation()``), which moves on every
change of content or ACLs: an entry never outlives the data it was computed from, so a revoked
document is not served from the cache for the rest of its TTL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Protocol

from django.core.cache import cache as django_cache

from knowledge.facade import Identity, SearchResult

KEY_VERSION = "v2"


def cache_key(query: str, identity: Identity, generation: int) -> str:
    digest = hashlib.sha256(query.encode("utf-8")).hexdigest()[:40]
    return f"qe:candidates:{KEY_VERSION}:{identity.cache_key()}:g{generation}:{digest}"


class CandidateCache(Protocol):
    """Plain (sync) methods: the engine calls them in its worker thread, in the search's step."""

    def get(self, key: str) -> SearchResult | None: ...

    def set(self, key: str, value: SearchResult, ttl: int) -> None: ...


class RedisCandidateCache:
    """Django's Redis cache (shared by every process)."""

    def get(self, key: str) -> SearchResult | None:
        return django_cache.get(key)

    def set(self, key: str, value: SearchResult, ttl: int) -> None:
        if ttl > 0:
            django_cache.set(key, value, ttl)


def cache_gate(
    *,
    query: str,
    identity: Identity,
    cache: CandidateCache,
    ttl: int,
    search: Callable[[str, Identity], SearchResult],
    generation: Callable[[], int],
) -> tuple[SearchResult, bool]:
    """(result, hit). On a miss KS is called and the result stored under its own key.

    ``generation`` is read before the search: a write that lands in between leaves a newer result
    under the older number, never an older result under the newer one."""
    key = cache_key(query, identity, generation())
    cached = cache.get(key)
    if cached is not None:
        return cached, True
    result = search(query, identity)
    cache.set(key, result, ttl)
    return result, False
