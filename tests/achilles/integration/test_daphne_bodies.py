"""Bodies reach the app as daphne receives them (``achilles.compat``): a malformed multipart upload
sent to a real daphne is the API's JSON 422, not Twisted's bare 400 (found by ``make fuzz``)."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from achilles.services import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_malformed_multipart_upload_through_daphne_is_a_json_422(admin_user, tmp_path):
    from tests.processes import STARTUP_SECONDS, start_daphne, stop

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _, token = api_token_create(user=admin_user)
    proc = start_daphne(tmp_path / "daphne.log", port)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "daphne.log").read_text()
                time.sleep(0.2)
        answer = httpx.post(
            f"http://127.0.0.1:{port}/api/knowledge/documents",
            content=b"--c637e12e2b1a998d80d1b087531af51c--\r\n",
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "multipart/form-data; boundary=c637e12e2b1a998d80d1b087531af51c",
            },
            timeout=30,
        )
        upload = httpx.post(
            f"http://127.0.0.1:{port}/api/knowledge/documents",
            files=[("files", ("note.txt", "Заметка о командировках.".encode()))],
            data={"acl": "everyone"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
    finally:
        stop(proc)
    # Failed before the fix: 400, no body, no content type (Twisted's own answer)
    assert answer.status_code == 422, (answer.status_code, answer.headers, answer.content[:200])
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json()["code"] == "validation_error"
    # and a well-formed one still arrives whole
    assert upload.status_code == 202, upload.text
    assert upload.json()["items"][0]["filename"] == "note.txt"
