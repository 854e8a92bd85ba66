"""``protocol.Claimed`` names the columns CLAIM_SQL returns at those positions."""

import pytest
from django.db import connection

from hub import protocol
from hub.protocol import Claimed

pytestmark = pytest.mark.django_db


def test_claimed_names_the_columns_the_claim_returns():
    with connection.cursor() as cursor:
        cursor.execute(protocol.CLAIM_SQL, {"limit": 0, "lease": 60, "agent": None})
        columns = [column.name for column in cursor.description]
    named = {name: position for name, position in vars(Claimed).items() if name.isupper()}
    assert {columns[position]: name for name, position in named.items()} == {
        "id": "ID",
        "batch_id": "BATCH_ID",
        "seq": "SEQ",
        "claims": "CLAIMS",
        "lease_token": "LEASE_TOKEN",
        "lease_expires_at": "LEASE_EXPIRES_AT",
        "type": "TYPE",
        "payload": "PAYLOAD",
        "depends_on": "DEPENDS_ON",
        "waits_for_batch": "WAITS_FOR_BATCH",
    }
    assert len(columns) == len(named)
