"""/api/openapi.json documents the error answers of every operation (`achilles/openapi.py`), so the
fuzzer's status_code_conformance holds (scripts/fuzz.py): before, only the success codes were there
and every 401/403/404/409/422 of the API was «undocumented»."""

from achilles.api import api
from achilles.openapi import ERRORS


def test_every_operation_documents_the_error_answers_in_the_error_shape():
    schema = api.get_openapi_schema()
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail", "code"]
    operations = [(path, method, op) for path, item in schema["paths"].items() for method, op in item.items()]
    assert len(operations) > 40
    for path, method, operation in operations:
        expected = set(ERRORS) - (set() if operation.get("security") else {"401"})
        expected -= set() if "requestBody" in operation else {"413", "415"}
        assert expected <= set(operation["responses"]), (method, path)


def test_a_route_without_auth_does_not_promise_a_401():
    schema = api.get_openapi_schema()
    public = [op for item in schema["paths"].values() for op in item.values() if not op.get("security")]
    assert all("401" not in op["responses"] for op in public)


def test_every_status_key_is_a_string_once():
    """A route declaring its own 404 (an int key from django-ninja) must not gain a second «404»: the
    served JSON would hold the key twice and a client keeps either one."""
    import json

    schema = api.get_openapi_schema()
    json.dumps(schema, sort_keys=True)  # mixed int/str keys cannot be sorted
    for item in schema["paths"].values():
        for operation in item.values():
            keys = list(operation["responses"])
            assert all(isinstance(key, str) for key in keys), keys
            assert len(keys) == len(set(keys))
