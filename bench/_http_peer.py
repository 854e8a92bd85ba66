"""The peer of ``bench/http``: a FastAPI + psycopg application answering the same two routes with
the same SQL on the same database.

``bench/http`` records the statements Achilles runs for each route (Django's own query capture,
one request each) and hands them over in ``BENCH_PEER_PLAN`` (a JSON file: the database's
connection parameters, the Bearer token, and per route its statements). The peer checks the
Bearer header, runs the route's statements on a pooled async connection (psycopg prepares them
after a few runs, as Django's own prepared statements do here) and answers JSON built from the
rows — what a hand-written FastAPI service over the same schema would do, with no framework of
ours in between. It is never imported by the platform.

    uvicorn bench._http_peer:app --port N   (with BENCH_PEER_PLAN set)
"""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, HTTPException
from fastapi.responses import Response
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

PLAN: dict[str, Any] = (
    json.loads(Path(os.environ["BENCH_PEER_PLAN"]).read_text()) if "BENCH_PEER_PLAN" in os.environ else {}
)
pool: AsyncConnectionPool | None = None


def _default(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


@asynccontextmanager
async def lifespan(_: FastAPI):
    global pool
    pool = AsyncConnectionPool(kwargs=PLAN["connection"], min_size=4, max_size=8, open=False)
    await pool.open(wait=True)
    try:
        yield
    finally:
        await pool.close()


app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)


async def _rows(route: str) -> list[list[dict[str, Any]]]:
    assert pool is not None
    results = []
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cursor:
        for statement in PLAN["routes"][route]:
            await cursor.execute(statement)
            results.append(await cursor.fetchall() if cursor.description else [])
    return results


def _authorized(authorization: str | None) -> None:
    if authorization != f"Bearer {PLAN['token']}":
        raise HTTPException(status_code=401, detail="unauthorized")


@app.get("/api/me")
async def me(authorization: str | None = Header(default=None)) -> Response:
    _authorized(authorization)
    results = await _rows("/api/me")
    if not results or not results[0]:
        raise HTTPException(status_code=401, detail="unauthorized")
    body = dict(results[0][0])
    body["groups"] = [row for result in results[1:] for row in result]
    return Response(json.dumps(body, default=_default), media_type="application/json")


@app.get("/api/conversations")
async def conversations(authorization: str | None = Header(default=None)) -> Response:
    _authorized(authorization)
    results = await _rows("/api/conversations")
    items = [row for result in results[1:] for row in result]
    return Response(json.dumps({"items": items, "next_cursor": None}, default=_default), media_type="application/json")
