"""A record write's input errors name their field (``field=``), so every transport locates it."""

import pytest

from achilles.errors import ValidationFailed, render, render_text
from knowledge import services

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "call, field, code",
    [
        (lambda: services.acl_resolve("group:hr"), "acl", "invalid_principal"),
        (lambda: services.acl_resolve([]), "acl", "empty_acl"),
        (lambda: services.acl_also_resolve("group:hr", ["everyone"]), "acl_also", "invalid_principal"),
    ],
)
def test_acl_errors_name_their_field(call, field, code):
    with pytest.raises(ValidationFailed) as raised:
        call()
    assert (raised.value.field, raised.value.code) == (field, code)
    assert render(raised.value).body["detail"][0]["loc"] == ["body", field]
    assert render_text(raised.value).startswith(f"{code} ({field}): ")
