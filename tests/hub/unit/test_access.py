"""The project ACL rule itself (``hub.access``), without a database."""

from hub.access import access_for, command_projects, key_project, project_acl
from hub.command_contract import commands_parse
from hub.hub_settings import setting_validate

ACL_MAP = {"AURORA": ["group:finance", "user:7"], "ZEUS": ["everyone"]}


def test_a_listed_project_is_readable_when_a_principal_meets_its_acl():
    sales = access_for(principals=["everyone", "group:sales", "user:3"], acl_map=ACL_MAP)
    finance = access_for(principals=["everyone", "group:finance", "user:4"], acl_map=ACL_MAP)
    seven = access_for(principals=["everyone", "user:7"], acl_map=ACL_MAP)
    assert (sales.may_read("AURORA"), sales.may_read("ZEUS"), sales.may_read("HERA")) == (False, True, True)
    assert finance.may_read("AURORA") and seven.may_read("AURORA")


def test_an_unlisted_project_is_everyones_and_its_acl_is_sorted():
    assert project_acl("HERA", ACL_MAP) == ["everyone"]
    assert project_acl("AURORA", ACL_MAP) == ["group:finance", "user:7"]


def test_the_filter_hides_only_the_listed_projects_you_may_not_read():
    sales = access_for(principals=["everyone"], acl_map=ACL_MAP)
    assert "AURORA" in str(sales.q()) and "ZEUS" not in str(sales.q())
    assert str(access_for(principals=["group:finance"], acl_map={"AURORA": ["group:finance"]}).q()) == "(AND: )"


def test_the_projects_a_batch_names():
    parsed = commands_parse(
        [
            {"type": "ensure_issue", "project": "HERA", "summary": "s", "issue_type": "Task", "labels": ["AWPCA"]},
            {"type": "ensure_comment", "key": "$1", "body": "x"},
            {"type": "ensure_link", "key": "ZEUS-1", "link_type": "Blocks", "other_key": "AURORA_X-12"},
            {"type": "refresh", "keys": ["MISC-4"]},
        ]
    )
    assert command_projects(parsed) == {"HERA", "ZEUS", "AURORA_X", "MISC"}
    assert key_project(" aurora-12 ") == "AURORA"


def test_project_acl_principals_are_checked_before_anything_reaches_the_database():
    assert setting_validate(key="project_acl", value={"AURORA": ["group:fin", "user:12"]}) == {
        "AURORA": ["group:fin", "user:12"]
    }
