"""The directory's configuration, read from the environment only (no Django, no python-ldap here).

``directory_config(environ)`` is what ``achilles.settings`` stores as ``LDAP_DIRECTORY``: None when
``LDAP_SERVER_URI`` is unset (nothing changes: local accounts only), else a frozen
``DirectoryConfig``. A bad value raises ``ConfigError`` naming the variable; the settings turn it
into the start-up failure every other variable gets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

GROUP_TYPES = ("groupOfNames", "nested_groupOfNames", "posix", "active_directory", "nested_active_directory")
LOCAL_SIGNIN_POLICIES = ("all", "staff", "none")

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """A directory variable with a value that cannot be used (the message names it)."""


@dataclass(frozen=True)
class MirrorFilter:
    """Which directory groups become Achilles groups: exact names and ``prefix*`` patterns.

    Sign-in and the sync are authoritative for the names it matches only: a group it does not
    match (set by hand in the admin) is never added or removed by the directory."""

    names: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    def matches(self, name: str) -> bool:
        return name in self.names or any(name.startswith(prefix) for prefix in self.prefixes)

    @classmethod
    def parse(cls, raw: str) -> MirrorFilter:
        names: set[str] = set()
        prefixes: list[str] = []
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            if item.endswith("*"):
                if "*" in item[:-1]:
                    raise ConfigError(f"LDAP_MIRROR_GROUPS: «{item}» may have one * only, at the end")
                prefixes.append(item[:-1])
            elif "*" in item:
                raise ConfigError(f"LDAP_MIRROR_GROUPS: «{item}» may have one * only, at the end")
            else:
                names.add(item)
        return cls(names=frozenset(names), prefixes=tuple(prefixes))


@dataclass(frozen=True)
class DirectoryConfig:
    """An LDAP / Active Directory server to sign people in against and to sync them from."""

    server_uri: str
    bind_dn: str
    bind_password: str
    user_search_base: str
    user_filter: str
    group_search_base: str
    group_type: str
    mirror: MirrorFilter
    start_tls: bool
    ca_file: str
    attr_email: str
    attr_first_name: str
    attr_last_name: str
    attr_timezone: str
    sync_interval_minutes: int


def _bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in _TRUE | _FALSE:
        raise ConfigError(f"{name} must be true or false, not {raw!r}")
    return value in _TRUE


def directory_config(environ: Mapping[str, str] = os.environ) -> DirectoryConfig | None:
    """The directory described by ``environ``, or None without ``LDAP_SERVER_URI``."""

    def get(name: str, default: str = "") -> str:
        return (environ.get(name) or default).strip()

    uri = get("LDAP_SERVER_URI")
    if not uri:
        return None
    for part in uri.split():
        if not part.startswith(("ldap://", "ldaps://", "ldapi://")):
            raise ConfigError(f"LDAP_SERVER_URI must be ldap://, ldaps:// or ldapi:// URIs, not {part!r}")
    user_base = get("LDAP_USER_SEARCH_BASE")
    if not user_base:
        raise ConfigError("LDAP_USER_SEARCH_BASE must be set when LDAP_SERVER_URI is (where the people are)")
    user_filter = get("LDAP_USER_FILTER", "(uid=%(user)s)")
    if "%(user)s" not in user_filter or not (user_filter.startswith("(") and user_filter.endswith(")")):
        raise ConfigError(f"LDAP_USER_FILTER must be an LDAP filter containing %(user)s, not {user_filter!r}")
    group_type = get("LDAP_GROUP_TYPE", "groupOfNames")
    if group_type not in GROUP_TYPES:
        raise ConfigError(f"LDAP_GROUP_TYPE must be one of {', '.join(GROUP_TYPES)}, not {group_type!r}")
    start_tls = _bool(environ, "LDAP_START_TLS", False)
    if start_tls and any(part.startswith("ldaps://") for part in uri.split()):
        raise ConfigError("LDAP_START_TLS cannot be used with an ldaps:// LDAP_SERVER_URI (it is TLS already)")
    ca_file = get("LDAP_CA_FILE")
    if ca_file and not os.path.isfile(ca_file):
        raise ConfigError(f"LDAP_CA_FILE names no readable file: {ca_file!r}")
    bind_dn, bind_password = get("LDAP_BIND_DN"), environ.get("LDAP_BIND_PASSWORD") or ""
    if bind_dn and not bind_password:
        raise ConfigError("LDAP_BIND_PASSWORD must be set when LDAP_BIND_DN is")
    raw_interval = get("LDAP_SYNC_INTERVAL_MINUTES", "15")
    try:
        interval = int(raw_interval)
    except ValueError:
        interval = 0
    if interval < 1:
        raise ConfigError(f"LDAP_SYNC_INTERVAL_MINUTES must be a whole number of minutes ≥ 1, not {raw_interval!r}")
    return DirectoryConfig(
        server_uri=uri,
        bind_dn=bind_dn,
        bind_password=bind_password,
        user_search_base=user_base,
        user_filter=user_filter,
        group_search_base=get("LDAP_GROUP_SEARCH_BASE"),
        group_type=group_type,
        mirror=MirrorFilter.parse(get("LDAP_MIRROR_GROUPS")),
        start_tls=start_tls,
        ca_file=ca_file,
        attr_email=get("LDAP_ATTR_EMAIL", "mail"),
        attr_first_name=get("LDAP_ATTR_FIRST_NAME", "givenName"),
        attr_last_name=get("LDAP_ATTR_LAST_NAME", "sn"),
        attr_timezone=get("LDAP_ATTR_TIMEZONE"),
        sync_interval_minutes=interval,
    )


def local_signin_policy(environ: Mapping[str, str] = os.environ) -> str:
    """``LOCAL_SIGNIN``: who may sign in with a local password — ``all`` (the default), ``staff``
    (break-glass administrators only) or ``none``."""
    raw = (environ.get("LOCAL_SIGNIN") or "all").strip().lower()
    if raw not in LOCAL_SIGNIN_POLICIES:
        raise ConfigError(f"LOCAL_SIGNIN must be one of {', '.join(LOCAL_SIGNIN_POLICIES)}, not {raw!r}")
    return raw
