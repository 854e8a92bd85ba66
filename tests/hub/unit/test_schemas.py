"""The mirror page's parsing (PROTOCOL.md upload): Jira's offsets, and what a bad page is refused with."""

import datetime as dt

import pytest
from pydantic import ValidationError

from hub.schemas import UploadIn
from tests.hub.conftest import issue_payload


@pytest.mark.parametrize(
    ("jira", "offset"),
    [
        ("2026-11-30T11:50:00.000+0000", 0),
        ("2026-11-30T11:50:00.000+0300", 180),
        (" 2026-11-30T11:50:00-0530 ", -330),
        ("2026-11-30T11:50:00+03:00", 180),
        ("2026-11-30T11:50:00Z", 0),
    ],
)
def test_jira_offsets_parse(jira, offset):
    issue = UploadIn.model_validate({"issues": [issue_payload("AURORA-1", updated=jira)]}).issues[0]
    assert issue.updated.utcoffset() == dt.timedelta(minutes=offset)
    assert (issue.updated.hour, issue.updated.minute) == (11, 50)


@pytest.mark.parametrize("bad", ["yesterday", "2026-11-30T11:50:00+03", "2026-11-30T11:50:00+٠٣٠٠"])
def test_a_bad_updated_is_refused(bad):
    with pytest.raises(ValidationError) as caught:
        UploadIn.model_validate({"issues": [issue_payload("AURORA-1", updated=bad)]})
    assert caught.value.errors()[0]["loc"] == ("issues", 0, "updated")


def test_extra_fields_are_ignored_and_the_key_must_be_in_its_project():
    page = UploadIn.model_validate(
        {
            "issues": [
                issue_payload(
                    "AURORA-1",
                    newer_field=1,
                    links=[{"link_type": "Blocks", "direction": "inward", "other_key": "AURORA-2", "id": "7"}],
                )
            ]
        }
    )
    assert page.issues[0].links[0].model_dump() == {
        "link_type": "Blocks",
        "direction": "inward",
        "other_key": "AURORA-2",
    }
    with pytest.raises(ValidationError, match="key AURORA-1 is not in project BOREAS"):
        UploadIn.model_validate({"issues": [issue_payload("AURORA-1", project="BOREAS")]})
