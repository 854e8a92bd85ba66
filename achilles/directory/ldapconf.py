"""django-auth-ldap's settings and python-ldap's options for a ``DirectoryConfig`` (one place)."""

from __future__ import annotations

from typing import Any

import ldap
from django_auth_ldap.config import (
    ActiveDirectoryGroupType,
    GroupOfNamesType,
    LDAPSearch,
    NestedActiveDirectoryGroupType,
    NestedGroupOfNamesType,
    PosixGroupType,
)

from achilles.directory.config import DirectoryConfig

# AD's userAccountControl: ACCOUNTDISABLE (0x2).
UAC_ACCOUNT_DISABLE = 0x2

_GROUP_TYPES: dict[str, tuple[type, str]] = {
    "groupOfNames": (GroupOfNamesType, "(objectClass=groupOfNames)"),
    "nested_groupOfNames": (NestedGroupOfNamesType, "(objectClass=groupOfNames)"),
    "posix": (PosixGroupType, "(objectClass=posixGroup)"),
    "active_directory": (ActiveDirectoryGroupType, "(objectClass=group)"),
    "nested_active_directory": (NestedActiveDirectoryGroupType, "(objectClass=group)"),
}


def connection_options(config: DirectoryConfig) -> dict[int, Any]:
    # Referrals off (AD answers with some that need other credentials); the server's certificate is
    # always verified, whatever /etc/ldap/ldap.conf says (TLS_REQCERT), against LDAP_CA_FILE if set.
    options: dict[int, Any] = {ldap.OPT_REFERRALS: 0, ldap.OPT_NETWORK_TIMEOUT: 10}
    if config.ca_file:
        options[ldap.OPT_X_TLS_CACERTFILE] = config.ca_file
    options[ldap.OPT_X_TLS_REQUIRE_CERT] = ldap.OPT_X_TLS_DEMAND
    options[ldap.OPT_X_TLS_NEWCTX] = 0  # last: builds the TLS context from the options above
    return options


def user_search(config: DirectoryConfig) -> LDAPSearch:
    return LDAPSearch(config.user_search_base, ldap.SCOPE_SUBTREE, config.user_filter)


def auth_ldap_settings(config: DirectoryConfig) -> dict[str, Any]:
    """The library's settings (its ``AUTH_LDAP_*`` names without the prefix) for ``config``."""
    attr_map = {
        field: attr
        for field, attr in (
            ("email", config.attr_email),
            ("first_name", config.attr_first_name),
            ("last_name", config.attr_last_name),
        )
        if attr
    }
    values: dict[str, Any] = {
        "SERVER_URI": config.server_uri,
        "BIND_DN": config.bind_dn,
        "BIND_PASSWORD": config.bind_password,
        "USER_SEARCH": user_search(config),
        "USER_ATTR_MAP": attr_map,
        "ALWAYS_UPDATE_USER": True,
        "START_TLS": config.start_tls,
        "CONNECTION_OPTIONS": connection_options(config),
        "MIRROR_GROUPS": None,  # ours: achilles.directory.services.directory_user_apply
    }
    if config.group_search_base:
        group_type, group_filter = _GROUP_TYPES[config.group_type]
        values["GROUP_SEARCH"] = LDAPSearch(config.group_search_base, ldap.SCOPE_SUBTREE, group_filter)
        values["GROUP_TYPE"] = group_type()
    return values


def directory_disabled(attrs: Any) -> bool:
    """Whether a directory entry's attributes say the account is switched off (AD's
    ``userAccountControl`` ACCOUNTDISABLE bit; a directory without the attribute never says so)."""
    values = (attrs or {}).get("userAccountControl") or (attrs or {}).get("useraccountcontrol") or []
    try:
        return bool(values) and bool(int(values[0]) & UAC_ACCOUNT_DISABLE)
    except (TypeError, ValueError):
        return False
