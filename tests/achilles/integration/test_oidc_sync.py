"""OpenID Connect groups at sign-in (``achilles.directory.oidc``): claim paths, the mirror filter,
an absent claim against an empty one, Entra ID's object ids and its overage pointer; the
providers' configuration; a deactivated account refused."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory

from achilles import audit
from achilles.directory.config import ConfigError
from achilles.directory.oidc import (
    ABSENT,
    OVERAGE,
    OidcSocialAccountAdapter,
    claim_groups,
    oidc_user_apply,
)
from achilles.directory.oidcconf import oidc_providers
from achilles.models import AuditEvent, User

pytestmark = pytest.mark.django_db

ENTRA_SALES, ENTRA_LEGAL = "9f1c7a52-0d4e-4c57-9a4b-1f2a3b4c5d6e", "0b6a6c88-2f4d-45e1-8a3c-7d9e0f1a2b3c"


def provider(**entry):
    base = {"id": "corp", "server_url": "https://sso.example.com/realms/corp", "client_id": "achilles"}
    return oidc_providers({"OIDC_PROVIDERS": json.dumps([{**base, **entry}])})[0]


def groups_of(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_claim_paths_nested_and_across_token_and_userinfo():
    keycloak = provider(groups_claim="realm_access.roles")
    id_token = {"sub": "1", "realm_access": {"roles": ["kb-a", "offline_access"]}}
    userinfo = {"sub": "1", "realm_access": {"roles": ["kb-b"]}}
    assert claim_groups([id_token, userinfo], keycloak) == (["kb-a", "kb-b", "offline_access"], "")
    assert claim_groups([{"realm_access": {}}, None], keycloak) == (None, ABSENT)
    assert claim_groups([{"realm_access": {"roles": "kb-a"}}], keycloak) == (["kb-a"], "")  # one value, not a list
    assert claim_groups([{"realm_access": {"roles": [1, 2]}}], keycloak)[0] is None


def test_mirror_filter_absent_claim_keeps_and_empty_claim_removes():
    corp = provider(groups_claim="groups", mirror_groups="kb-*")
    user = User.objects.create_user("petrov", source="oidc")
    user.groups.add(Group.objects.create(name="hand-set"))
    added, removed = oidc_user_apply(user=user, provider=corp, userinfo={"groups": ["kb-x", "other"]}, id_token={})
    assert (added, removed) == (["kb-x"], []) and groups_of(user) == {"hand-set", "kb-x"}

    # The provider sent no claim at all: nothing is known, nothing removed — and that is audited.
    assert oidc_user_apply(user=user, provider=corp, userinfo={"sub": "p"}, id_token={"sub": "p"}) == ([], [])
    assert groups_of(user) == {"hand-set", "kb-x"}
    unknown = AuditEvent.objects.get(action=audit.IDENTITY_GROUPS_UNKNOWN, target=f"user:{user.pk}")
    assert unknown.details["reason"] == ABSENT and unknown.details["via"] == "oidc"

    # An empty list is an answer: every mirrored group goes, the hand-set one stays.
    assert oidc_user_apply(user=user, provider=corp, userinfo={"groups": []}, id_token=None) == ([], ["kb-x"])
    assert groups_of(user) == {"hand-set"}
    changed = AuditEvent.objects.filter(action=audit.DIRECTORY_GROUPS_CHANGED, target=f"user:{user.pk}")
    assert [e.details["removed"] for e in changed.order_by("id")] == [[], ["kb-x"]]


def test_entra_object_ids_are_mapped_and_the_overage_pointer_keeps_groups():
    entra = provider(
        groups_claim="groups", mirror_groups="sales,legal", group_names={ENTRA_SALES: "sales", ENTRA_LEGAL: "legal"}
    )
    user = User.objects.create_user("smirnova")
    token = {"oid": "u-1", "tid": "t-1", "groups": [ENTRA_SALES, "11111111-2222-3333-4444-555555555555"]}
    assert oidc_user_apply(user=user, provider=entra, userinfo=None, id_token=token) == (["sales"], [])
    assert groups_of(user) == {"sales"} and User.objects.get(pk=user.pk).source == "oidc"

    # Past 200 groups Entra drops the claim and points at Graph instead.
    overage = {
        "oid": "u-1",
        "_claim_names": {"groups": "src1"},
        "_claim_sources": {"src1": {"endpoint": "https://graph.windows.net/t-1/users/u-1/getMemberObjects"}},
    }
    assert claim_groups([overage], entra) == (None, OVERAGE)
    assert oidc_user_apply(user=user, provider=entra, userinfo=None, id_token=overage) == ([], [])
    assert groups_of(user) == {"sales"}
    event = AuditEvent.objects.get(action=audit.IDENTITY_GROUPS_UNKNOWN, target=f"user:{user.pk}")
    assert event.details["reason"] == OVERAGE and event.details["provider"] == "corp"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"id": "Bad Id"}, "lower-case"),
        ({"server_url": "sso.example.com"}, "http(s) URL"),
        ({"scopes": ["profile"]}, "includes openid"),
        ({"mirror_groups": "kb-*x*"}, "one * only"),
        ({"group_names": {"a": 1}}, "group_names"),
        ({"client_id": ""}, "client_id"),
    ],
)
def test_bad_provider_configuration_names_the_problem(entry, message):
    with pytest.raises(ConfigError, match="OIDC_PROVIDERS") as caught:
        provider(**entry)
    assert message in str(caught.value)


def test_unparsable_or_duplicate_providers_refused():
    with pytest.raises(ConfigError, match="JSON list"):
        oidc_providers({"OIDC_PROVIDERS": "{not json"})
    one = {"id": "a", "server_url": "https://a.example", "client_id": "x"}
    with pytest.raises(ConfigError, match="two providers"):
        oidc_providers({"OIDC_PROVIDERS": json.dumps([one, one])})
    assert oidc_providers({}) == ()
    # The mirror filter defaults to LDAP_MIRROR_GROUPS'.
    assert oidc_providers({"OIDC_PROVIDERS": json.dumps([one]), "LDAP_MIRROR_GROUPS": "kb-*"})[0].mirror.matches("kb-1")


class _Account:
    def __init__(self, provider_id: str, uid: str):
        self.provider, self.uid, self.extra_data = provider_id, uid, {}


class _SocialLogin:
    def __init__(self, user, provider_id: str, existing: bool):
        self.user, self.account, self.is_existing, self.email_addresses = (
            user,
            _Account(provider_id, "s-1"),
            existing,
            [],
        )


def _request():
    request = RequestFactory().get("/accounts/oidc/corp/login/callback/")
    request.session = {}
    request._messages = FallbackStorage(request)
    return request


def test_a_deactivated_account_is_refused_and_so_is_an_address_that_is_taken(settings):
    from allauth.core.exceptions import ImmediateHttpResponse

    settings.OIDC_PROVIDERS = (provider(name="Корп"),)
    adapter = OidcSocialAccountAdapter()
    gone = User.objects.create_user("gone", is_active=False, source="oidc")
    with pytest.raises(ImmediateHttpResponse) as refused:
        adapter.pre_social_login(_request(), _SocialLogin(gone, "corp", existing=True))
    assert refused.value.response["Location"] == settings.LOGIN_URL
    assert AuditEvent.objects.filter(action=audit.SIGNIN_FAILED, details__reason="inactive").exists()

    User.objects.create_user("boss", email="Boss@Corp.example")
    newcomer = User(username="mallory", email="boss@corp.example")
    with pytest.raises(ImmediateHttpResponse):
        adapter.pre_social_login(_request(), _SocialLogin(newcomer, "corp", existing=False))
    assert AuditEvent.objects.filter(action=audit.SIGNIN_FAILED, details__reason="account_exists").exists()
    adapter.pre_social_login(_request(), _SocialLogin(User(username="new", email="new@corp.example"), "corp", False))


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize(
    "path", ["/accounts/oidc/nobody/login/", "/accounts/oidc/nobody/login/callback/", "/accounts/signup/"]
)
def test_allauth_routes_of_no_provider_or_its_own_pages_answer_404(client, method, path):
    assert getattr(client, method)(path).status_code == 404
