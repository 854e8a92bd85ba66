"""The hub setting ``project_acl`` rules every path to a mirrored issue at once: the Knowledge Store's
records (re-ACLed in the setting's own transaction), the REST issue routes, the notes, the batches
and the MCP tools — one rule, ``hub.access``: the caller's principals meet the project's ACL
(a project not in the map: ``everyone``)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from achilles.errors import NotFound, PermissionDenied, ValidationFailed
from hub import selectors, services
from hub.contracts import IssueFilters
from hub.permissions import hub_group_ensure
from knowledge import facade
from tests.achilles.factories import UserFactory
from tests.hub.conftest import issue_payload

pytestmark = pytest.mark.django_db

J = "application/json"


def hub_person(username: str, *groups: str):
    person = UserFactory(username=username, groups=list(groups))
    person.groups.add(hub_group_ensure())
    return person


@pytest.fixture
def fed_mirror(mirror, django_capture_on_commit_callbacks, monkeypatch):
    """``fed_mirror(*payloads)``: upload and run the Knowledge Store feed the commit would queue
    (the Celery task's body, inline: only the issues the upload wrote are fed)."""
    from hub import tasks
    from hub.knowledge_feed import mirror_to_knowledge

    monkeypatch.setattr(tasks.mirror_to_knowledge_task, "delay", lambda ids: mirror_to_knowledge(issue_ids=ids))

    def upload(*issues: dict) -> dict:
        with django_capture_on_commit_callbacks(execute=True):
            return mirror(*issues)

    return upload


def found_keys(user, query: str) -> set[str]:
    result = facade.search(query, facade.Identity.for_user(user), k=50)
    return {c.title.split(" ")[0] for c in result.candidates if c.source_system == "jira"}


def aurora_and_zeus(fed_mirror, count: int = 3) -> None:
    fed_mirror(
        *[issue_payload(f"AURORA-{9000 + n}", summary=f"Квазарный отчёт {n}") for n in range(1, count + 1)],
        issue_payload("ZEUS-1", summary="Квазарный план"),
    )


# ---------------------------------------------------------------- the Knowledge Store follows the setting


def test_a_project_acl_change_re_acls_every_mirrored_record_of_the_project(fed_mirror, hub_staff):
    # given: issues mirrored and fed while AURORA was open to everyone
    aurora_and_zeus(fed_mirror, count=4)
    bob = hub_person("bob", "sales")
    fin = hub_person("fin", "finance")
    assert found_keys(bob, "квазарный") == {"AURORA-9001", "AURORA-9002", "AURORA-9003", "AURORA-9004", "ZEUS-1"}
    before = facade.generation()

    # when: the admin restricts AURORA (no sync, no refresh afterwards)
    services.settings_set(user=hub_staff, key="project_acl", value={"AURORA": ["group:finance"]})

    # then: at once, every AURORA record follows; ZEUS stays open; the content generation moved
    assert found_keys(bob, "квазарный") == {"ZEUS-1"}
    assert found_keys(fin, "квазарный") == {"AURORA-9001", "AURORA-9002", "AURORA-9003", "AURORA-9004", "ZEUS-1"}
    assert facade.generation() > before


def test_a_project_removed_from_the_map_goes_back_to_everyone(fed_mirror, hub_staff):
    aurora_and_zeus(fed_mirror)
    bob = hub_person("bob", "sales")
    services.settings_set(user=hub_staff, key="project_acl", value={"AURORA": ["group:finance"], "ZEUS": ["user:1"]})
    assert found_keys(bob, "квазарный") == set()

    services.settings_set(user=hub_staff, key="project_acl", value={"ZEUS": ["user:1"]})

    assert found_keys(bob, "квазарный") == {"AURORA-9001", "AURORA-9002", "AURORA-9003"}


def test_a_full_refresh_of_unchanged_issues_keeps_the_current_acl(fed_mirror, hub_staff):
    # given: AURORA restricted after its issues were fed
    aurora_and_zeus(fed_mirror)
    services.settings_set(user=hub_staff, key="project_acl", value={"AURORA": ["group:finance"]})
    bob = hub_person("bob", "sales")

    # when: a full sync uploads the same issues again (unchanged) and one changed issue
    fed_mirror(
        issue_payload("AURORA-9001", summary="Квазарный отчёт 1"),
        issue_payload("AURORA-9002", summary="Квазарный отчёт 2 (правка)", updated="2026-11-30T12:00:00.000+0000"),
        issue_payload("AURORA-9003", summary="Квазарный отчёт 3"),
    )

    # then: none of them is open to bob, changed or not
    assert found_keys(bob, "квазарный") == {"ZEUS-1"}


def test_the_feed_writes_under_the_acl_current_when_it_runs(fed_mirror, hub_staff, mirror):
    # given: an upload whose feed is still queued when the admin restricts the project
    from hub.knowledge_feed import mirror_to_knowledge
    from hub.models import MirrorIssue

    mirror(issue_payload("AURORA-9010", summary="Квазарный аудит"))  # the on-commit feed is not run
    services.settings_set(user=hub_staff, key="project_acl", value={"AURORA": ["group:finance"]})

    # when: the queued feed runs
    mirror_to_knowledge(issue_ids=list(MirrorIssue.objects.values_list("id", flat=True)))

    # then
    assert found_keys(hub_person("bob", "sales"), "квазарный") == set()
    assert found_keys(hub_person("fin", "finance"), "квазарный") == {"AURORA-9010"}


def test_a_feed_that_read_the_map_before_a_change_does_not_undo_it(hub_staff, mirror, monkeypatch):
    # given: a feed that read the map just before the admin's change committed (the stale read)
    from hub import knowledge_feed
    from hub.models import MirrorIssue

    mirror(issue_payload("AURORA-9011", summary="Квазарный аудит"))
    services.settings_set(user=hub_staff, key="project_acl", value={"AURORA": ["group:finance"]})
    stale: list[dict] = [{}]
    current = knowledge_feed.project_acl_map
    monkeypatch.setattr(knowledge_feed, "project_acl_map", lambda: stale.pop() if stale else current())

    # when: it writes the record under what it read
    knowledge_feed.mirror_to_knowledge(issue_ids=list(MirrorIssue.objects.values_list("id", flat=True)))

    # then: its final check under the setting's lock put the record under the current ACL
    assert found_keys(hub_person("bob", "sales"), "квазарный") == set()
    assert found_keys(hub_person("fin", "finance"), "квазарный") == {"AURORA-9011"}


def test_a_change_of_another_setting_leaves_the_records_and_generation_alone(fed_mirror, hub_staff):
    aurora_and_zeus(fed_mirror)
    before = facade.generation()
    services.settings_set(user=hub_staff, key="poll_interval_seconds", value=30)
    services.settings_set(user=hub_staff, key="project_acl", value={})  # the same as before: nothing moves
    assert facade.generation() == before


def test_the_re_acl_is_audited_with_the_setting_change(fed_mirror, hub_staff):
    from achilles.models import AuditEvent

    aurora_and_zeus(fed_mirror)
    services.settings_set(user=hub_staff, key="project_acl", value={"AURORA": ["group:finance"]})
    event = AuditEvent.objects.get(action="hub_setting_changed", target="hub_setting:project_acl")
    assert event.details["value"] == {"AURORA": ["group:finance"]}
    assert event.details["records_re_acled"] == {"AURORA": 3}


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "value, where",
    [
        ({"AURORA": ["finance"]}, "value.AURORA.0"),
        ({"AURORA": ["group:finance", "user:bob"]}, "value.AURORA.1"),
        ({"AURORA": ["public"]}, "value.AURORA.0"),
        ({"AURORA": ["group:"]}, "value.AURORA.0"),
        ({"AURORA": ["group:Отдел продаж"]}, "value.AURORA.0"),
        ({"AURORA": ["user:0"]}, "value.AURORA.0"),
        ({"AURORA": [""]}, "value.AURORA.0"),
        ({"AURORA": []}, "value.AURORA"),
        ({"aurora": ["everyone"]}, "value.aurora"),
        ({"AURORA": "group:finance"}, "value.AURORA"),
    ],
)
def test_a_bad_project_acl_is_a_422_naming_the_field(client, hub_staff, token_for, value, where):
    response = client.put("/api/hub/settings/project_acl", {"value": value}, content_type=J, **token_for(hub_staff))
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["code"] == "validation_error"
    assert body["detail"][0]["loc"] == ["body", *where.split(".")], body


def test_well_formed_principals_are_accepted(hub_staff):
    value = {"AURORA": ["group:finance", "user:7", "everyone"], "ZEUS": ["group:Отдел_продаж"]}
    services.settings_set(user=hub_staff, key="project_acl", value=value)
    assert selectors.setting_value("project_acl") == value


def test_a_bad_value_is_refused_before_anything_is_written(fed_mirror, hub_staff):
    aurora_and_zeus(fed_mirror)
    with pytest.raises(ValidationFailed):
        services.settings_set(user=hub_staff, key="project_acl", value={"AURORA": ["finance"]})
    assert selectors.setting_value("project_acl") == {}


# ---------------------------------------------------------------- the hub's own routes


@pytest.fixture
def restricted(fed_mirror, hub_staff):
    fed_mirror(
        issue_payload(
            "AURORA-9003",
            summary="Бюджет отдела",
            links=[{"link_type": "Blocks", "direction": "outward", "other_key": "ZEUS-1"}],
        ),
        issue_payload(
            "ZEUS-1",
            summary="План",
            links=[{"link_type": "Relates", "direction": "outward", "other_key": "AURORA-9004"}],
        ),
        issue_payload("AURORA-9004", summary="Секретная смета"),
    )
    services.settings_set(user=hub_staff, key="project_acl", value={"AURORA": ["group:finance"]})


def test_a_card_of_a_project_you_may_not_read_is_a_404(client, token_for, restricted):
    bob = token_for(hub_person("bob", "sales"))
    fin = token_for(hub_person("fin", "finance"))

    hidden = client.get("/api/hub/issues/AURORA-9003", **bob)
    missing = client.get("/api/hub/issues/AURORA-1", **bob)

    assert hidden.status_code == 404, hidden.content
    assert hidden.json() == {**missing.json(), "detail": missing.json()["detail"].replace("AURORA-1", "AURORA-9003")}
    assert client.get("/api/hub/issues/AURORA-9003", **fin).status_code == 200


def test_lists_leave_out_issues_of_projects_you_may_not_read(client, token_for, restricted):
    bob = token_for(hub_person("bob", "sales"))
    fin = token_for(hub_person("fin", "finance"))

    def keys(headers, query=""):
        return {row["key"] for row in client.get(f"/api/hub/issues{query}", **headers).json()["items"]}

    assert keys(bob) == {"ZEUS-1"}
    assert keys(bob, "?project=AURORA") == set()
    assert keys(bob, "?text=AURORA-9003") == set()
    assert keys(fin) == {"AURORA-9003", "AURORA-9004", "ZEUS-1"}


def test_a_readable_card_shows_no_summary_of_an_issue_you_may_not_read(client, token_for, restricted):
    bob = token_for(hub_person("bob", "sales"))

    card = client.get("/api/hub/issues/ZEUS-1", **bob).json()

    # its own outward link stays (it is ZEUS-1's data), without the hidden summary; the inward link
    # AURORA-9003 holds towards ZEUS-1 is AURORA's data and is left out
    assert [(lk["other_key"], lk["other_summary"]) for lk in card["links"]] == [("AURORA-9004", "")]


def test_notes_of_an_issue_you_may_not_read_are_a_404(client, token_for, restricted):
    bob = token_for(hub_person("bob", "sales"))
    fin = token_for(hub_person("fin", "finance"))
    url = "/api/hub/issues/AURORA-9003/notes"

    assert client.patch(url, {"note": "x"}, content_type=J, **bob).status_code == 404
    assert client.patch(url, {"note": "x"}, content_type=J, **fin).status_code == 200


@pytest.mark.parametrize(
    "commands",
    [
        [{"type": "ensure_fields", "key": "AURORA-9003", "fields": {"duedate": "2026-12-01"}}],
        [{"type": "ensure_transition", "key": "AURORA-9004", "status": "Done"}],
        [{"type": "ensure_link", "key": "ZEUS-1", "link_type": "Blocks", "other_key": "AURORA-9003"}],
        [{"type": "ensure_issue", "project": "AURORA", "summary": "s", "issue_type": "Task", "labels": ["AWPCA"]}],
    ],
)
def test_a_batch_touching_a_project_you_may_not_read_is_a_403(client, token_for, restricted, commands):
    from hub.models import Batch

    bob = token_for(hub_person("bob", "sales"))
    response = client.post("/api/hub/batches", {"title": "t", "commands": commands}, content_type=J, **bob)
    assert response.status_code == 403, response.content
    assert response.json()["code"] == "project_not_readable"
    assert not Batch.objects.exists()
    fin = token_for(hub_person("fin", "finance"))
    assert (
        client.post("/api/hub/batches", {"title": "t", "commands": commands}, content_type=J, **fin).status_code == 201
    )


def test_a_refresh_of_keys_you_may_not_read_is_a_403_and_a_full_one_is_allowed(client, token_for, restricted):
    bob = token_for(hub_person("bob", "sales"))
    keys = client.post("/api/hub/refresh", {"keys": ["AURORA-9003"]}, content_type=J, **bob)
    assert keys.status_code == 403 and keys.json()["code"] == "project_not_readable"
    assert client.post("/api/hub/refresh", {"full": True}, content_type=J, **bob).status_code == 201


def test_the_selectors_and_services_say_the_same_to_every_caller(restricted):
    bob = hub_person("bob", "sales")
    with pytest.raises(NotFound):
        selectors.issue_card(user=bob, key="AURORA-9003")
    with pytest.raises(NotFound):
        services.notes_set(user=bob, key="AURORA-9003", fields={"note": "x"})
    with pytest.raises(PermissionDenied):
        services.refresh(user=bob, keys=["AURORA-9004"])
    assert [r.key for r in selectors.issues_list(user=bob, filters=IssueFilters())] == ["ZEUS-1"]


# ---------------------------------------------------------------- MCP (in process: the tool bodies, inline)


@pytest.fixture
def mcp_as(monkeypatch):
    """``mcp_as(user)(tool, arguments)`` → ``(is_error, text)`` of the hub's MCP tool run as ``user``."""
    from asgiref.sync import async_to_sync, sync_to_async

    from achilles.services import api_token_create
    from hub.mcp import server as mcp_server

    # Under async_to_sync a thread-sensitive sync_to_async runs on this thread: the test's
    # connection and transaction (the server's own worker threads would not see its rows).
    monkeypatch.setattr(mcp_server, "_in_thread", lambda fn: sync_to_async(fn)())
    built = mcp_server.build_server()
    tokens: dict[int, str] = {}

    def for_user(user):
        if user.pk not in tokens:
            tokens[user.pk] = api_token_create(user=user)[1]

        def call(tool: str, arguments: dict) -> tuple[bool, str]:
            async def go():
                reset = mcp_server.current_caller.set(mcp_server.Caller(token=tokens[user.pk]))
                try:
                    return await built.call_tool(tool, arguments)
                finally:
                    mcp_server.current_caller.reset(reset)

            result = async_to_sync(go)()
            return bool(result.is_error), "\n".join(block.text for block in result.content)

        return call

    return for_user


KEY_LINE = re.compile(r"^([A-Z][A-Z0-9_]*-\d+) \|")


def mcp_listed_keys(call) -> set[str]:
    is_error, text = call("issues", {"limit": 500})
    assert not is_error, text
    return {m.group(1) for line in text.splitlines() if (m := KEY_LINE.match(line))}


def test_mcp_tools_follow_the_project_acl(restricted, mcp_as):
    bob = mcp_as(hub_person("bob", "sales"))
    fin = mcp_as(hub_person("fin", "finance"))

    assert mcp_listed_keys(bob) == {"ZEUS-1"}
    assert mcp_listed_keys(fin) == {"AURORA-9003", "AURORA-9004", "ZEUS-1"}
    is_error, text = bob("issue", {"key": "AURORA-9003"})
    assert is_error and text.startswith("not_found:"), text
    assert bob("notes_set", {"key": "AURORA-9003", "note": "x"})[1].startswith("not_found:")
    assert not fin("issue", {"key": "AURORA-9003"})[0]
    assert "AURORA-9004" not in bob("knowledge_search", {"query": "Секретная смета"})[1]
    assert "AURORA-9004" in fin("knowledge_search", {"query": "Секретная смета"})[1]


# ---------------------------------------------------------------- property: every path equals the oracle

PROJECTS = ["AURORA", "ZEUS", "HERA"]
GROUPS = ["finance", "sales", "it"]
ISSUES = ["AURORA-1", "AURORA-2", "ZEUS-1", "HERA-1"]

acl_maps = st.dictionaries(
    st.sampled_from(PROJECTS),
    st.sets(st.sampled_from([*(f"group:{g}" for g in GROUPS), "everyone", "user:U0", "user:U1"]), min_size=1),
    max_size=3,
)
people = st.lists(st.sets(st.sampled_from(GROUPS), max_size=2), min_size=2, max_size=3)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(first=acl_maps, second=acl_maps, groups_of=people)
def test_what_each_user_sees_is_what_the_oracle_says(
    fed_mirror, hub_staff, client, token_for, mcp_as, first, second, groups_of
):
    # given: the same six issues, users in random groups, a random map changed once to another
    from django.contrib.auth.models import Group

    from achilles.models import User
    from hub.models import HubSetting

    HubSetting.objects.filter(key="project_acl").delete()
    User.objects.filter(username__startswith="prop").delete()
    Group.objects.filter(name__in=GROUPS).delete()
    users = [hub_person(f"prop{i}", *sorted(groups)) for i, groups in enumerate(groups_of)]

    def concrete(acl_map):
        # user:U0 / user:U1 stand for the first two users' ids
        return {
            project: sorted(p.replace("U0", str(users[0].pk)).replace("U1", str(users[1].pk)) for p in acl)
            for project, acl in acl_map.items()
        }

    fed_mirror(*[issue_payload(key, summary=f"Кварцевый отчёт {key}") for key in ISSUES])
    services.settings_set(user=hub_staff, key="project_acl", value=concrete(first))

    # when
    services.settings_set(user=hub_staff, key="project_acl", value=concrete(second))

    # then: the oracle — a user reads an issue iff its project is unlisted or shares a principal
    for index, user in enumerate(users):
        mine = {f"user:{user.pk}", "everyone", "public", *(f"group:{g}" for g in groups_of[index])}
        acl_map = concrete(second)
        expected = {key for key in ISSUES if set(acl_map.get(key.split("-")[0], ["everyone"])) & mine}
        headers = token_for(user)
        listed = {row["key"] for row in client.get("/api/hub/issues?limit=100", **headers).json()["items"]}
        cards = {key for key in ISSUES if client.get(f"/api/hub/issues/{key}", **headers).status_code == 200}
        call = mcp_as(user)
        mcp_cards = {key for key in ISSUES if not call("issue", {"key": key})[0]}
        assert listed == expected, (acl_map, groups_of[index])
        assert cards == expected
        assert mcp_listed_keys(call) == expected
        assert mcp_cards == expected
        assert found_keys(user, "кварцевый") == expected
