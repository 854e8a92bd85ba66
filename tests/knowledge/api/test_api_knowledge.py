"""REST: POST /api/knowledge/search, admin preview, admin upsert/delete, status (KS-2/5, PLAT-7/8)."""

import json

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/knowledge"


def post(client, path, body, **extra):
    return client.post(f"{URL}{path}", data=json.dumps(body), content_type="application/json", **extra)


@pytest.fixture
def records(make_record, user_factory):
    finance = user_factory(username="fin", groups=["finance"])
    make_record("open.md", "Отпуск 28 дней.", acl=["everyone"], title="Отпуск", url="https://wiki/otpusk")
    make_record("fin.md", "Бюджет на отпуска 5 млн.", acl=["group:finance"], author=f"user:{finance.pk}")
    return finance


def test_search_runs_as_the_caller(client_for, user, records, settings):
    settings.WITHHELD_MIN_RECORDS = 1  # a two-record corpus: «отпуск» is in both (issue 10 threshold: 3)
    response = post(client_for(user), "/search", {"query": "отпуск", "k": 5})
    assert response.status_code == 200
    body = response.json()
    assert [c["title"] for c in body["candidates"]] == ["Отпуск"]
    assert set(body["candidates"][0]) == {
        "record_id",
        "chunk_id",
        "title",
        "url",
        "source_system",
        "text",
        "score",
        "rank",
    }
    assert body["withheld"] == [{"source_system": "files", "author_principal_id": f"user:{records.pk}"}]
    assert body["is_empty"] is False


def test_search_with_a_bearer_token(user, token_for, records, client):
    response = post(client, "/search", {"query": "отпуск"}, **token_for(user))
    assert response.status_code == 200


def test_admin_previews_another_users_result(client_for, admin_user, records):
    response = post(client_for(admin_user), "/search", {"query": "бюджет отпуска", "as_user_id": records.pk})
    assert response.status_code == 200
    assert "Бюджет на отпуска 5 млн." in [c["text"] for c in response.json()["candidates"]]


def test_non_admin_cannot_preview_as_someone_else(client_for, user, records):
    response = post(client_for(user), "/search", {"query": "бюджет", "as_user_id": records.pk})
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_preview_of_unknown_user_is_404(client_for, admin_user):
    assert post(client_for(admin_user), "/search", {"query": "x", "as_user_id": 10**9}).status_code == 404


def test_search_without_credentials_is_401(client):
    assert post(client, "/search", {"query": "отпуск"}).status_code == 401


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"query": ""},
        {"query": "   "},
        {"query": "x", "k": 0},
        {"query": "x", "k": 51},
        {"query": "x" * 2001},
        {"query": 5, "k": "many"},
        {"query": ["a"]},
    ],
)
def test_bad_search_input_is_422(client_for, user, body):
    response = post(client_for(user), "/search", body)
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"


def test_malformed_json_is_not_500(client_for, user):
    response = client_for(user).post(f"{URL}/search", data="{not json", content_type="application/json")
    assert response.status_code in (400, 422)


RECORD = {
    "source_system": "confluence",
    "external_id": "PAGE-1",
    "title": "Регламент",
    "text": "# Регламент\n\nТекст.",
    "acl": ["everyone"],
    "url": "https://confluence/1",
}


def test_admin_upserts_and_deletes_records(client_for, admin_user, token_for, client):
    headers = token_for(admin_user)
    created = client.put(f"{URL}/records", data=json.dumps(RECORD), content_type="application/json", **headers)
    assert created.status_code == 201 and created.json()["status"] == "created"
    again = client.put(f"{URL}/records", data=json.dumps(RECORD), content_type="application/json", **headers)
    assert again.status_code == 200 and again.json()["status"] == "unchanged"
    changed = client.put(
        f"{URL}/records",
        data=json.dumps({**RECORD, "text": "Новый текст."}),
        content_type="application/json",
        **headers,
    )
    assert changed.json()["status"] == "updated" and changed.json()["record_id"] == created.json()["record_id"]
    deleted = client.delete(f"{URL}/records?source_system=confluence&external_id=PAGE-1", **headers)
    assert deleted.status_code == 204
    assert client.delete(f"{URL}/records?source_system=confluence&external_id=PAGE-1", **headers).status_code == 404


def test_record_upsert_takes_all_of_clauses(client_for, admin_user):
    from knowledge.models import Record

    client = client_for(admin_user)
    body = {**RECORD, "acl_also": [["group:hr", "group:hr"], ["group:dev"]]}
    created = client.put(f"{URL}/records", data=json.dumps(body), content_type="application/json")
    assert created.status_code == 201
    assert Record.objects.get(pk=created.json()["record_id"]).acl_also == [["group:dev"], ["group:hr"]]
    # the clauses changed alone: updated, the same record
    again = client.put(f"{URL}/records", data=json.dumps(RECORD), content_type="application/json")
    assert again.json()["status"] == "updated"
    assert Record.objects.get(pk=created.json()["record_id"]).acl_also is None


def test_non_admin_cannot_write_records(client_for, user):
    client = client_for(user)
    assert client.put(f"{URL}/records", data=json.dumps(RECORD), content_type="application/json").status_code == 403
    assert client.delete(f"{URL}/records?source_system=files&external_id=x").status_code == 403


@pytest.mark.parametrize(
    "change",
    [
        {"acl": []},
        {"acl": ["root"]},
        {"acl": ["user:nobody-here"]},
        {"title": ""},
        {"source_system": "Bad System"},
        {"text": "   "},
        {"url": "javascript:alert(document.cookie)"},
        {"url": "data:text/html,<b>x</b>"},
        {"url": "//evil.example/x"},
        {"url": "https://"},
        {"acl_also": [[]]},
        {"acl_also": [["root"]]},
        {"acl_also": ["group:hr"]},
    ],
)
def test_bad_record_is_422(client_for, admin_user, change):
    response = client_for(admin_user).put(
        f"{URL}/records", data=json.dumps({**RECORD, **change}), content_type="application/json"
    )
    assert response.status_code == 422


def test_status_reports_the_search_mode(client_for, user, hash_embedder, make_record):
    make_record("a.md", "Текст.")
    body = client_for(user).get(f"{URL}/status").json()
    assert body == {"is_empty": False, "records": 1, "chunks": 1, "embedding_model": "hash-384", "vector_search": True}


def test_admin_search_preview_page(client_for, admin_user, records):
    client = client_for(admin_user)
    page = client.get(
        "/admin/knowledge/record/search-preview/", {"query": "бюджет отпуска", "user": records.pk, "k": 5}
    )
    assert page.status_code == 200
    assert "Бюджет на отпуска 5 млн." in page.content.decode()
    changelist = client.get("/admin/knowledge/record/")
    assert changelist.status_code == 200
    assert "Поиск только лексический." in changelist.content.decode()
    # and in English for an administrator who chose it
    admin_user.language = "en"
    admin_user.save(update_fields=["language"])
    english = client.get(
        "/admin/knowledge/record/search-preview/", {"query": "бюджет отпуска", "k": 5}
    ).content.decode()
    assert "Search preview" in english and "Withheld (coordinates only)" in english and "Проверка" not in english
    assert "Search is lexical only." in client.get("/admin/knowledge/record/").content.decode()


def test_admin_edits_a_records_acl_and_chunks_follow(client_for, admin_user, make_record):
    from knowledge.models import Chunk, Record

    rid = make_record("a.md", "Текст.", acl=["everyone"])
    response = client_for(admin_user).post(
        f"/admin/knowledge/record/{rid}/change/",
        {
            "acl": "group:finance,user:root",
            "links_out-TOTAL_FORMS": "0",
            "links_out-INITIAL_FORMS": "0",
            "chunks-TOTAL_FORMS": "1",
            "chunks-INITIAL_FORMS": "1",
            "chunks-0-id": str(Chunk.objects.get(record_id=rid).pk),
            "chunks-0-record": str(rid),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Record.objects.get(pk=rid).acl == ["group:finance", f"user:{admin_user.pk}"]
    assert Chunk.objects.get(record_id=rid).acl == ["group:finance", f"user:{admin_user.pk}"]


def test_admin_acl_edit_with_an_unknown_principal_is_a_form_error(client_for, admin_user, make_record):
    from knowledge.models import Record

    rid = make_record("a.md", "Текст.", acl=["everyone"])
    response = client_for(admin_user).post(
        f"/admin/knowledge/record/{rid}/change/",
        {
            "acl": "user:ghost",
            "links_out-TOTAL_FORMS": "0",
            "links_out-INITIAL_FORMS": "0",
            "chunks-TOTAL_FORMS": "0",
            "chunks-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200 and "ghost" in response.content.decode()
    assert Record.objects.get(pk=rid).acl == ["everyone"]
