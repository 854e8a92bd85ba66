"""``web_search``: a provider interface and a SearxNG-compatible implementation.

Offered to the model only when the admin enabled it (``platform_settings.web_search_enabled``
with a ``web_search_url``). Tests use a stub provider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import httpx

from achilles.errors import ServiceUnavailable


@dataclass(frozen=True)
class WebResult:
    title: str
    url: str
    snippet: str


class WebSearchProvider(Protocol):
    async def search(self, query: str, limit: int) -> list[WebResult]: ...


class SearxngWebSearch:
    """``GET {base_url}/search?q=…&format=json`` (SearxNG's JSON API)."""

    def __init__(self, base_url: str, timeout: float = 8.0, transport: httpx.AsyncBaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.transport = transport  # tests pass an httpx.MockTransport

    async def search(self, query: str, limit: int) -> list[WebResult]:
        try:
            async with httpx.AsyncClient(timeout=self.timeout, transport=self.transport) as client:
                response = await client.get(f"{self.base_url}/search", params={"q": query, "format": "json"})
                response.raise_for_status()
                payload = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ServiceUnavailable(f"web search failed: {exc}", code="web_search_unavailable") from exc
        results = []
        for item in payload.get("results", [])[:limit]:
            if isinstance(item, dict) and item.get("url"):
                results.append(
                    WebResult(
                        title=str(item.get("title") or item["url"]),
                        url=str(item["url"]),
                        snippet=str(item.get("content") or ""),
                    )
                )
        return results
