"""OpenID Connect providers, read from the environment only (no Django here).

``OIDC_PROVIDERS`` is a JSON list, one object per provider (docs/directory-oidc.md)::

    [{"id": "keycloak", "name": "Keycloak", "server_url": "https://sso.example.com/realms/corp",
      "client_id": "achilles", "secret": "…", "scopes": ["openid", "profile", "email"],
      "groups_claim": "realm_access.roles", "mirror_groups": "kb-*",
      "group_names": {"<Entra object id>": "sales"}}]

``server_url`` is the issuer (discovery reads ``<server_url>/.well-known/openid-configuration``).
``groups_claim`` is a dotted path into the claims (none: groups are not synced);
``mirror_groups`` has ``LDAP_MIRROR_GROUPS``' syntax and defaults to its value; ``group_names``
maps claim values (Entra ID's object ids) to group names.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from achilles.directory.config import ConfigError, MirrorFilter

_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


@dataclass(frozen=True)
class OidcProvider:
    id: str
    name: str
    server_url: str
    client_id: str
    secret: str
    scopes: tuple[str, ...]
    groups_claim: str
    mirror: MirrorFilter
    group_names: Mapping[str, str] = field(default_factory=dict)
    uid_field: str = "sub"
    pkce: bool = True
    token_auth_method: str = ""

    def allauth_app(self) -> dict[str, Any]:
        """The provider as an entry of allauth's ``SOCIALACCOUNT_PROVIDERS["openid_connect"]["APPS"]``."""
        return {
            "provider_id": self.id,
            "name": self.name,
            "client_id": self.client_id,
            "secret": self.secret,
            "settings": {
                "server_url": self.server_url,
                "uid_field": self.uid_field,
                "scope": list(self.scopes),
                "fetch_userinfo": True,
                "oauth_pkce_enabled": self.pkce,
                **({"token_auth_method": self.token_auth_method} if self.token_auth_method else {}),
                # An address from a provider never signs anyone in to an existing account.
                "email_authentication": False,
                "verified_email": False,
            },
        }


def _str(entry: Mapping[str, Any], key: str, where: str, *, required: bool = True, default: str = "") -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or (required and not value.strip()):
        raise ConfigError(f"OIDC_PROVIDERS: {where} needs «{key}» (a non-empty string)")
    return value.strip()


def oidc_providers(environ: Mapping[str, str] = os.environ) -> tuple[OidcProvider, ...]:
    """The providers ``OIDC_PROVIDERS`` describes (none when it is unset)."""
    raw = (environ.get("OIDC_PROVIDERS") or "").strip()
    if not raw:
        return ()
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"OIDC_PROVIDERS must be a JSON list of providers: {exc.msg} at {exc.pos}") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError("OIDC_PROVIDERS must be a JSON list of objects, one per provider")
    default_mirror = environ.get("LDAP_MIRROR_GROUPS") or ""
    providers: list[OidcProvider] = []
    for index, entry in enumerate(entries):
        where = f"provider #{index + 1}"
        pid = _str(entry, "id", where)
        if not _ID.match(pid):
            raise ConfigError(f"OIDC_PROVIDERS: {where} id {pid!r} must be lower-case letters, digits, - or _")
        where = f"provider «{pid}»"
        if any(p.id == pid for p in providers):
            raise ConfigError(f"OIDC_PROVIDERS: two providers have the id «{pid}»")
        server_url = _str(entry, "server_url", where).rstrip("/")
        if not server_url.startswith(("https://", "http://")):
            raise ConfigError(f"OIDC_PROVIDERS: {where} server_url must be an http(s) URL, not {server_url!r}")
        scopes = entry.get("scopes", ["openid", "profile", "email"])
        if isinstance(scopes, str):
            scopes = scopes.split()
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes) or "openid" not in scopes:
            raise ConfigError(f"OIDC_PROVIDERS: {where} scopes must be a list of strings that includes openid")
        names = entry.get("group_names", {})
        if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
            raise ConfigError(f"OIDC_PROVIDERS: {where} group_names must map claim values to group names")
        mirror_raw = entry.get("mirror_groups", default_mirror)
        if not isinstance(mirror_raw, str):
            raise ConfigError(f"OIDC_PROVIDERS: {where} mirror_groups must be a string like LDAP_MIRROR_GROUPS")
        pkce = entry.get("pkce", True)
        if not isinstance(pkce, bool):
            raise ConfigError(f"OIDC_PROVIDERS: {where} pkce must be true or false")
        method = _str(entry, "token_auth_method", where, required=False)
        if method not in ("", "client_secret_post", "client_secret_basic"):
            raise ConfigError(
                f"OIDC_PROVIDERS: {where} token_auth_method must be client_secret_post or client_secret_basic"
            )
        try:
            mirror = MirrorFilter.parse(mirror_raw)
        except ConfigError as exc:
            raise ConfigError(f"OIDC_PROVIDERS: {where} mirror_groups: {exc}") from None
        providers.append(
            OidcProvider(
                id=pid,
                name=_str(entry, "name", where, required=False, default=pid) or pid,
                server_url=server_url,
                client_id=_str(entry, "client_id", where),
                secret=_str(entry, "secret", where, required=False),
                scopes=tuple(scopes),
                groups_claim=_str(entry, "groups_claim", where, required=False),
                mirror=mirror,
                group_names=dict(names),
                uid_field=_str(entry, "uid_field", where, required=False, default="sub") or "sub",
                pkce=pkce,
                token_auth_method=method,
            )
        )
    return tuple(providers)
