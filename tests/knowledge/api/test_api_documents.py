"""REST for uploaded documents: who may upload and grant what, the list / one / delete / download
routes, and bad input as 4xx (never 500). Parse tasks are captured, not run (see the integration
tests for the task itself)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Document, Record
from knowledge.uploads.services import document_parse

pytestmark = [pytest.mark.api, pytest.mark.django_db]

URL = "/api/knowledge/documents"
TEXT = "Порядок оформления командировки\n\nЗаявку подают за пять рабочих дней.".encode("cp1251")


def _file(name="trips.txt", data=TEXT):
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


@pytest.fixture
def uploader(user_factory):
    """A non-staff user granted the upload permission through a group."""
    from django.contrib.auth.models import Group

    user = user_factory(username="editor", groups=["editors", "it"])
    Group.objects.get(name="editors").permissions.add(Permission.objects.get(codename="add_document"))
    return user


def _upload(client, *files, acl=None, **extra):
    data = {"files": list(files)}
    if acl is not None:
        data["acl"] = acl
    return client.post(URL, data, **extra)


def test_upload_queues_each_file_and_sends_its_parse_task_after_commit(
    uploader, client_for, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", sent.append)
    client = client_for(uploader)

    with django_capture_on_commit_callbacks(execute=True):
        response = _upload(client, _file("a.txt"), _file("b.md", b"# B\n\ntext"), acl=["group:it"])

    assert response.status_code == 202, response.content
    body = response.json()
    assert [item["state"] for item in body["items"]] == ["queued", "queued"]
    assert [item["filename"] for item in body["items"]] == ["a.txt", "b.md"]
    assert body["items"][0]["acl"] == ["group:it"] and body["rejected"] == []
    assert sorted(sent) == sorted(item["id"] for item in body["items"])
    assert Record.objects.count() == 0  # nothing parsed in the request


def test_default_acl_is_only_me_and_me_is_its_shorthand(uploader, client_for, monkeypatch):
    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)
    client = client_for(uploader)

    default = _upload(client, _file()).json()["items"][0]
    explicit = _upload(client, _file(), acl="me,everyone").json()["items"][0]

    assert default["acl"] == [f"user:{uploader.pk}"]
    assert explicit["acl"] == ["everyone", f"user:{uploader.pk}"]


@pytest.mark.parametrize("principal", ["group:finance", "public", "user:{other}"])
def test_an_uploader_cannot_grant_what_they_do_not_hold(principal, uploader, user_factory, client_for):
    from django.contrib.auth.models import Group

    Group.objects.create(name="finance")
    other = user_factory(username="other")

    response = _upload(client_for(uploader), _file(), acl=principal.format(other=other.pk))

    assert response.status_code == 403 and response.json()["code"] == "acl_not_allowed"
    assert not Document.objects.exists()


def test_staff_may_grant_any_existing_group_but_not_an_unknown_one(admin_user, client_for, monkeypatch):
    from django.contrib.auth.models import Group

    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)
    Group.objects.create(name="finance")
    client = client_for(admin_user)

    granted = _upload(client, _file(), acl="group:finance")
    unknown = _upload(client, _file(), acl="group:nobody")
    malformed = _upload(client, _file(), acl="group with spaces")
    huge_user = _upload(client, _file(), acl=f"user:{10**30}")

    assert granted.status_code == 202 and granted.json()["items"][0]["acl"] == ["group:finance"]
    assert unknown.status_code == 422 and unknown.json()["code"] == "unknown_principal"
    assert malformed.status_code == 422
    assert huge_user.status_code == 422 and huge_user.json()["code"] == "unknown_principal"


def test_without_the_permission_403_and_without_credentials_401(user_factory, client_for):
    from django.test import Client

    plain = user_factory(username="plain")

    assert _upload(client_for(plain), _file()).status_code == 403
    assert _upload(Client(), _file()).status_code == 401
    assert not Document.objects.exists()


def test_bearer_token_upload(uploader, token_for, monkeypatch):
    from django.test import Client

    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)

    response = _upload(Client(), _file(), **token_for(uploader))

    assert response.status_code == 202


def test_bad_input_is_422_never_500(uploader, client_for):
    client = client_for(uploader)

    no_files = client.post(URL, {"acl": "everyone"})
    unsupported = _upload(client, _file("setup.exe", b"MZ"))
    empty = _upload(client, _file("empty.txt", b""))
    nul_acl = _upload(client, _file(), acl="group:\x00x")

    assert no_files.status_code == 422
    assert unsupported.status_code == 422 and unsupported.json()["code"] == "upload_rejected"
    assert "not supported" in str(unsupported.json()["detail"])
    assert empty.status_code == 422 and "empty" in str(empty.json()["detail"])
    assert nul_acl.status_code == 422
    assert not Document.objects.exists()


def test_one_bad_file_is_rejected_on_its_own(uploader, client_for, settings, monkeypatch):
    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)
    settings.KNOWLEDGE_UPLOAD_MAX_MB = 1

    response = _upload(client_for(uploader), _file("big.txt", b"x" * (2**20 + 1)), _file("ok.txt"), acl="everyone")

    body = response.json()
    assert response.status_code == 202
    assert [item["filename"] for item in body["items"]] == ["ok.txt"]
    assert body["rejected"] == [{"filename": "big.txt", "code": "too_large", "detail": body["rejected"][0]["detail"]}]
    assert "over the limit of 1 MB" in body["rejected"][0]["detail"]


def test_a_body_over_the_upload_limit_is_413(uploader, client_for, settings):
    settings.KNOWLEDGE_UPLOAD_MAX_MB = 1
    settings.KNOWLEDGE_UPLOAD_MAX_FILES = 1

    response = _upload(client_for(uploader), _file("big.txt", b"x" * (3 * 2**20)))

    assert response.status_code == 413 and response.json()["code"] == "payload_too_large"


def test_list_shows_own_documents_staff_see_all(uploader, user_factory, admin_user, client_for, monkeypatch):
    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)
    colleague = user_factory(username="colleague", groups=["editors"])
    mine = _upload(client_for(uploader), _file("mine.txt")).json()["items"][0]["id"]
    theirs = _upload(client_for(colleague), _file("theirs.txt")).json()["items"][0]["id"]

    own = client_for(uploader).get(URL).json()
    everything = client_for(admin_user).get(URL).json()

    assert [item["id"] for item in own["items"]] == [mine] and own["next_cursor"] is None
    assert [item["id"] for item in everything["items"]] == [theirs, mine]
    assert client_for(uploader).get(f"{URL}/{theirs}").status_code == 404
    assert client_for(uploader).get(f"{URL}/{mine}").json()["state"] == "queued"


def test_delete_removes_the_document_and_its_record(uploader, client_for, monkeypatch, user_factory):
    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)
    client = client_for(uploader)
    document_id = _upload(client, _file(), acl="everyone").json()["items"][0]["id"]
    document_parse(document_id=document_id)
    record_id = Document.objects.get(pk=document_id).record_id
    stranger = user_factory(username="stranger")

    assert client_for(stranger).delete(f"{URL}/{document_id}").status_code == 404
    response = client.delete(f"{URL}/{document_id}")

    assert response.status_code == 204
    assert not Document.objects.filter(pk=document_id).exists()
    assert not Record.objects.filter(pk=record_id).exists()
    assert client.delete(f"{URL}/{document_id}").status_code == 404


def test_download_follows_the_record_acl(uploader, user_factory, client_for, monkeypatch):
    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)
    client = client_for(uploader)
    document_id = _upload(client, _file("Командировки.txt"), acl="group:it").json()["items"][0]["id"]
    colleague = user_factory(username="colleague", groups=["it"])
    outsider = user_factory(username="outsider", groups=["sales"])
    url = f"{URL}/{document_id}/download"

    before = (client.get(url).status_code, client_for(colleague).get(url).status_code)
    document_parse(document_id=document_id)
    response = client_for(colleague).get(url)

    assert before == (200, 404)  # not indexed yet: only its uploader
    assert response.status_code == 200 and response.content == TEXT
    assert response["Content-Disposition"].startswith("attachment;")
    assert "filename*=UTF-8''%D0%9A" in response["Content-Disposition"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(outsider).get(f"{URL}/999999/download").status_code == 404


def test_upload_through_the_asgi_application(uploader, asgi_client, monkeypatch):
    """As daphne serves it: the multipart body through the ASGI handler and the middleware chain."""
    import httpx

    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)
    encoded = httpx.Request(
        "POST", "http://testserver" + URL, files=[("files", ("trips.txt", TEXT))], data={"acl": "everyone"}
    )
    body = encoded.read()

    response = asgi_client(uploader).post(URL, content=body, headers={"Content-Type": encoded.headers["Content-Type"]})

    assert response.status_code == 202, response.text
    assert response.json()["items"][0]["size"] == len(TEXT)
    assert bytes(Document.objects.get().content) == TEXT


@pytest.mark.parametrize(
    "body",
    [b"--b--\r\n", b"", b"--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--\r\n", b"not multipart at all"],
    ids=["no-parts", "empty", "part-without-name", "garbage"],
)
@pytest.mark.parametrize("transport", ["test-client", "asgi"])
def test_a_malformed_multipart_body_is_a_json_422(uploader, client_for, asgi_client, body, transport):
    """Found by `make fuzz`: a multipart body with no parts (``--b--``), sent to daphne, answered a
    plain 400 with no body."""
    content_type = "multipart/form-data; boundary=b"
    if transport == "asgi":
        answer = asgi_client(uploader).post(URL, content=body, headers={"Content-Type": content_type})
        status, headers, payload = answer.status_code, answer.headers, answer.content
    else:
        answer = client_for(uploader).generic("POST", URL, body, content_type=content_type)
        status, headers, payload = answer.status_code, answer, answer.content
    assert status == 422, (status, payload[:200])
    assert headers["Content-Type"].startswith("application/json")
    assert set(json.loads(payload)) >= {"detail", "code"}
    assert not Document.objects.exists()


@pytest.mark.parametrize("session", [False, True], ids=["token", "session"])
def test_multipart_without_a_boundary_is_a_415(uploader, asgi_client, session):
    """Found by `make fuzz`: ``Content-Type: multipart/form-data`` with no boundary was a 500."""
    answer = asgi_client(uploader, session=session).post(
        URL, content=b"x", headers={"Content-Type": "multipart/form-data"}
    )
    assert answer.status_code == 415, (answer.status_code, answer.content[:300])
    assert answer.json()["code"] == "unsupported_media_type"
    assert "boundary" in answer.json()["detail"]
    assert not Document.objects.exists()
