"""The directory's environment (issue 24): defaults, the mirror filter, and bad values that stop
start-up with a message naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from achilles.directory.config import ConfigError, MirrorFilter, directory_config, local_signin_policy

pytestmark = [pytest.mark.unit]

ROOT = Path(__file__).resolve().parents[3]
BASE = {"LDAP_SERVER_URI": "ldap://dc1.corp.example", "LDAP_USER_SEARCH_BASE": "ou=people,dc=corp,dc=example"}


def test_without_a_server_uri_there_is_no_directory():
    assert directory_config({}) is None
    assert directory_config({"LDAP_USER_SEARCH_BASE": "ou=people,dc=x"}) is None


def test_defaults():
    config = directory_config(BASE)
    assert config is not None
    assert (config.user_filter, config.group_type, config.start_tls, config.sync_interval_minutes) == (
        "(uid=%(user)s)",
        "groupOfNames",
        False,
        15,
    )
    assert (config.attr_email, config.attr_first_name, config.attr_last_name, config.attr_timezone) == (
        "mail",
        "givenName",
        "sn",
        "",
    )
    assert not config.mirror.matches("anything")  # no LDAP_MIRROR_GROUPS: no group is synced


def test_the_mirror_filter_takes_names_and_prefixes():
    mirror = MirrorFilter.parse(" achilles-* , Finance,, legal ")
    assert [mirror.matches(n) for n in ("achilles-eng", "achilles-", "Finance", "finance", "legal", "hr")] == [
        True,
        True,
        True,
        False,
        True,
        False,
    ]
    assert MirrorFilter.parse("*").matches("any group at all")


@pytest.mark.parametrize(
    ("extra", "variable"),
    [
        ({"LDAP_SERVER_URI": "dc1.corp.example"}, "LDAP_SERVER_URI"),
        ({"LDAP_USER_SEARCH_BASE": ""}, "LDAP_USER_SEARCH_BASE"),
        ({"LDAP_USER_FILTER": "(uid=alice)"}, "LDAP_USER_FILTER"),
        ({"LDAP_GROUP_TYPE": "nested_posix"}, "LDAP_GROUP_TYPE"),
        ({"LDAP_START_TLS": "maybe"}, "LDAP_START_TLS"),
        ({"LDAP_START_TLS": "true", "LDAP_SERVER_URI": "ldaps://dc1"}, "LDAP_START_TLS"),
        ({"LDAP_CA_FILE": "/nonexistent/ca.pem"}, "LDAP_CA_FILE"),
        ({"LDAP_BIND_DN": "cn=svc,dc=corp"}, "LDAP_BIND_PASSWORD"),
        ({"LDAP_MIRROR_GROUPS": "a*b"}, "LDAP_MIRROR_GROUPS"),
        ({"LDAP_SYNC_INTERVAL_MINUTES": "0"}, "LDAP_SYNC_INTERVAL_MINUTES"),
    ],
)
def test_a_bad_value_names_its_variable(extra, variable):
    with pytest.raises(ConfigError, match=variable):
        directory_config({**BASE, **extra})


def test_local_signin_policy():
    assert local_signin_policy({}) == "all"
    assert local_signin_policy({"LOCAL_SIGNIN": "Staff"}) == "staff"
    with pytest.raises(ConfigError, match="LOCAL_SIGNIN"):
        local_signin_policy({"LOCAL_SIGNIN": "admins"})


PROBE = "import achilles.settings as s; print(sorted(s.PLATFORM_PERIODIC_JOBS)); print(s.AUTHENTICATION_BACKENDS)"


def _settings(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LDAP_") and k != "LOCAL_SIGNIN"}
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=60
    )


def test_settings_add_the_backend_and_the_sync_job_only_with_a_directory():
    plain = _settings()
    assert plain.returncode == 0, plain.stderr
    assert "directory.sync" not in plain.stdout and "DirectoryBackend" not in plain.stdout
    configured = _settings(**BASE, LDAP_SYNC_INTERVAL_MINUTES="5")
    assert configured.returncode == 0, configured.stderr
    assert "directory.sync" in configured.stdout and "achilles.directory.backends.DirectoryBackend" in configured.stdout


def test_a_bad_value_stops_start_up_naming_the_variable():
    result = _settings(**BASE, LDAP_GROUP_TYPE="groupOfUniqueNames")
    assert result.returncode == 2
    assert "configuration error: LDAP_GROUP_TYPE must be one of" in result.stderr
