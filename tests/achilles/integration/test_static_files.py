"""Static files are served by the app itself (WhiteNoise over ``collectstatic``'s output).

Issue 9: under ``make run`` ``/admin/`` had no CSS and ``/api/docs`` was a blank page — nothing
served ``/static/``. These tests failed before WhiteNoise was in the chain (every asset was a 404).
"""

from __future__ import annotations

import re

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

ASSET = re.compile(r'(?:href|src)="(/static/[^"]+\.(?:css|js))"')


def _assets(html: str) -> list[str]:
    return sorted(set(ASSET.findall(html)))


def test_admin_and_api_docs_assets_are_served_hashed_and_compressed(admin_user):
    client = Client()
    client.force_login(admin_user)
    pages = {"/admin/": client.get("/admin/"), "/api/docs": client.get("/api/docs")}
    for url, page in pages.items():
        assert page.status_code == 200, url
        assets = _assets(page.content.decode())
        assert any(a.endswith(".css") for a in assets) and (url == "/admin/" or any(a.endswith(".js") for a in assets))
        for asset in assets:
            # hashed name from the manifest: cacheable for good
            assert re.search(r"\.[0-9a-f]{12}\.(css|js)$", asset), asset
            response = client.get(asset, headers={"accept-encoding": "gzip"})
            assert response.status_code == 200, asset
            assert response["Content-Type"].startswith(("text/css", "text/javascript", "application/javascript"))
            assert "max-age=315360000" in response["Cache-Control"] and "immutable" in response["Cache-Control"]
            body = b"".join(response.streaming_content)
            assert response.get("Content-Encoding") == "gzip" or len(body) < 200, asset
            response.close()


def test_static_files_on_the_async_path():
    """The ASGI chain (daphne) serves them too, without the sync middleware's thread hop."""

    async def go():
        client = AsyncClient()
        page = await client.get("/admin/login/")
        asset = _assets(page.content.decode())[0]
        response = await client.get(asset)
        body = (
            b"".join([chunk async for chunk in response.streaming_content])
            if hasattr(response.streaming_content, "__aiter__")
            else b"".join(response.streaming_content)
        )
        return page.status_code, response.status_code, body

    page_status, status, body = async_to_sync(go)()
    assert (page_status, status) == (200, 200) and len(body) > 100


def test_an_unknown_static_path_is_a_404_not_a_page():
    response = Client().get("/static/admin/css/nope.css")
    assert response.status_code == 404


def test_the_collected_files_are_scanned_once_per_collected_state(monkeypatch, settings):
    """Every middleware chain (each test client builds one) used to walk STATIC_ROOT again: 64 ms of
    CPU a chain. The table is now built once per process and per collected state: the same files with
    the same headers as WhiteNoise's own scan, and a scan again once ``collectstatic`` has written a
    new manifest."""
    import os

    import whitenoise.base
    from whitenoise.middleware import WhiteNoiseMiddleware

    from achilles import middleware

    scans = []
    scan = whitenoise.base.WhiteNoise.update_files_dictionary

    def counted(self, root, prefix):
        scans.append(root)
        return scan(self, root, prefix)

    monkeypatch.setattr(whitenoise.base.WhiteNoise, "update_files_dictionary", counted)
    monkeypatch.setattr(middleware, "_SCANNED", {}, raising=False)

    # when: three chains start
    chains = [middleware.StaticFilesMiddleware(lambda request: None) for _ in range(3)]
    # then: one scan, the same table as WhiteNoise's own
    assert len(scans) == 1
    own = WhiteNoiseMiddleware(lambda request: None)
    assert len(scans) == 2
    for chain in chains:
        files = chain.whitenoise.files
        assert files.keys() == own.files.keys() and len(files) > 100
        for url in files:
            ours, theirs = files[url].get_response("GET", {}), own.files[url].get_response("GET", {})
            assert ours.headers == theirs.headers, url
            for response in (ours, theirs):
                if response.file is not None:
                    response.file.close()

    # and a new manifest (collectstatic ran again) is scanned again
    manifest = settings.STATIC_ROOT / "staticfiles.json"
    stat = manifest.stat()
    os.utime(manifest, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    try:
        middleware.StaticFilesMiddleware(lambda request: None)
        assert len(scans) == 3
        assert len(middleware._SCANNED) == 1  # the earlier state's table is let go
    finally:
        os.utime(manifest, ns=(stat.st_atime_ns, stat.st_mtime_ns))
