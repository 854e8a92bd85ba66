"""A real OpenLDAP ``slapd`` for the directory tests (python-ldap's ``slapdtest``), one per session.

The server carries Debian's core, cosine, inetorgperson, nis and msuser schemas (the last for
AD's ``userAccountControl``, on ``extensibleObject`` entries). Each test gets a directory subtree
of its own (``ou=t<n>``) with people in nested groups::

    alice  → achilles-eng → achilles-all      (groupOfNames, both mirrored: alice gets both)
    alice  → other-team                       (not matched by the mirror filter: ignored)
    alice  → achilles-ad-eng → achilles-ad-all  (AD ``group`` entries, for the active_directory types)
    alice  → achilles-posix                   (posixGroup, memberUid)
    bob    → achilles-eng, userAccountControl 514 (ACCOUNTDISABLE): refused, deactivated
    carol  → achilles-ops

What this covers with OpenLDAP vs. real Active Directory: the user search, simple binds,
StartTLS with a CA, groupOfNames membership resolved level by level (the same ``member``
searches ``nested_active_directory`` makes), and the ACCOUNTDISABLE bit read from the entry.
Not covered: AD's own refusal to bind a disabled account, ``sAMAccountName`` matching rules,
``LDAP_MATCHING_RULE_IN_CHAIN`` and referrals (OpenLDAP has none of them).
"""

from __future__ import annotations

import itertools
import os
import shutil

import ldap
import pytest
from ldap import modlist

SUFFIX = "dc=example,dc=com"
PASSWORDS = {"alice": "alice-directory-pass", "bob": "bob-directory-pass", "carol": "carol-directory-pass"}
_subtrees = itertools.count(1)


def _require_slapd() -> None:
    # Fail, never skip: CI installs slapd (`make ldap-deps`), and a silently skipped directory
    # suite would hide every sign-in regression.
    if shutil.which("slapd") is None and not os.path.exists("/usr/sbin/slapd"):
        pytest.fail("slapd is not installed: run `make ldap-deps` (Debian: slapd ldap-utils)")


@pytest.fixture(scope="session")
def slapd_server():
    _require_slapd()
    import slapdtest

    class Server(slapdtest.SlapdObject):
        suffix = SUFFIX
        openldap_schema_files = ("core.ldif", "cosine.ldif", "inetorgperson.ldif", "nis.ldif", "msuser.ldif")

    server = Server()
    server.start()
    conn = server_connection(server)
    conn.add_s(
        SUFFIX,
        modlist.addModlist({"objectClass": [b"dcObject", b"organization"], "dc": [b"example"], "o": [b"Example"]}),
    )
    conn.unbind_s()
    yield server
    server.stop()


def server_connection(server):
    conn = ldap.initialize(server.ldap_uri, bytes_mode=False)
    conn.simple_bind_s(server.root_dn, server.root_pw)
    return conn


class Directory:
    """One test's subtree on the session's slapd, with helpers to change it as an admin would."""

    def __init__(self, server) -> None:
        self.server = server
        self.base = f"ou=t{next(_subtrees)},{SUFFIX}"
        self.people = f"ou=people,{self.base}"
        self.groups = f"ou=groups,{self.base}"
        self.conn = server_connection(server)

    def user_dn(self, uid: str) -> str:
        return f"uid={uid},{self.people}"

    def group_dn(self, name: str) -> str:
        return f"cn={name},{self.groups}"

    def add(self, dn: str, **attrs) -> None:
        entry = {
            k: [v.encode() if isinstance(v, str) else v for v in (vs if isinstance(vs, list) else [vs])]
            for k, vs in attrs.items()
        }
        self.conn.add_s(dn, modlist.addModlist(entry))

    def add_user(self, uid: str, *, disabled: bool = False, **extra) -> None:
        self.add(
            self.user_dn(uid),
            objectClass=["inetOrgPerson", "extensibleObject"],
            uid=uid,
            cn=uid.title(),
            sn=f"{uid.title()}son",
            givenName=uid.title(),
            mail=f"{uid}@example.com",
            userPassword=PASSWORDS[uid],
            userAccountControl="514" if disabled else "512",
            **extra,
        )

    def add_group(self, name: str, *members: str) -> None:
        self.add(self.group_dn(name), objectClass="groupOfNames", cn=name, member=list(members))

    def add_ad_group(self, name: str, *members: str) -> None:
        """An Active Directory group (msuser's ``group`` class, with the attributes AD itself fills in)."""
        self.add(
            self.group_dn(name),
            objectClass="group",
            cn=name,
            member=list(members),
            groupType="-2147483646",  # a global security group
            instanceType="4",
            nTSecurityDescriptor=b"\x01\x00",
            objectCategory=f"cn=Group,cn=Schema,cn=Configuration,{SUFFIX}",
        )

    def add_posix_group(self, name: str, gid: int, *member_uids: str) -> None:
        self.add(
            self.group_dn(name), objectClass="posixGroup", cn=name, gidNumber=str(gid), memberUid=list(member_uids)
        )

    def remove_member(self, group: str, member_dn: str) -> None:
        self.conn.modify_s(self.group_dn(group), [(ldap.MOD_DELETE, "member", [member_dn.encode()])])

    def set_attr(self, uid: str, attr: str, value: str) -> None:
        self.conn.modify_s(self.user_dn(uid), [(ldap.MOD_REPLACE, attr, [value.encode()])])

    def delete_user(self, uid: str) -> None:
        self.conn.delete_s(self.user_dn(uid))

    def env(self, **overrides: str) -> dict[str, str]:
        """The environment an operator would set for this directory (StartTLS with the test CA)."""
        values = {
            "LDAP_SERVER_URI": self.server.ldap_uri,
            "LDAP_BIND_DN": self.server.root_dn,
            "LDAP_BIND_PASSWORD": self.server.root_pw,
            "LDAP_USER_SEARCH_BASE": self.people,
            "LDAP_USER_FILTER": "(uid=%(user)s)",
            "LDAP_GROUP_SEARCH_BASE": self.groups,
            "LDAP_GROUP_TYPE": "nested_groupOfNames",
            "LDAP_MIRROR_GROUPS": "achilles-*",
            "LDAP_START_TLS": "true",
            "LDAP_CA_FILE": self.server.cafile,
            "LDAP_ATTR_TIMEZONE": "l",
        }
        values.update(overrides)
        return values

    def seed(self) -> None:
        self.add(self.base, objectClass="organizationalUnit", ou=self.base.split(",")[0][3:])
        self.add(self.people, objectClass="organizationalUnit", ou="people")
        self.add(self.groups, objectClass="organizationalUnit", ou="groups")
        self.add_user("alice", l="Europe/Berlin")
        self.add_user("bob", disabled=True)
        self.add_user("carol")
        self.add_group("achilles-eng", self.user_dn("alice"), self.user_dn("bob"))
        self.add_group("achilles-all", self.group_dn("achilles-eng"))
        self.add_group("other-team", self.user_dn("alice"))
        self.add_group("achilles-ops", self.user_dn("carol"))
        self.add_ad_group("achilles-ad-eng", self.user_dn("alice"))
        self.add_ad_group("achilles-ad-all", self.group_dn("achilles-ad-eng"))
        self.add_posix_group("achilles-posix", 5001, "alice")
