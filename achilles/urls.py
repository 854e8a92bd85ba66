from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from django.views.i18n import JavaScriptCatalog

from achilles import views
from achilles.api import api
from achilles.home import home
from achilles.metrics import metrics_view
from agents.pages import agents_page
from conversations.pages import chat_page, shared_page
from conversations.views import chat_sse
from hub.pages import hub_page
from knowledge.pages import knowledge_page


@csrf_exempt
def scim_endpoint(request: HttpRequest, path: str | None = "") -> HttpResponse:
    """``/scim/v2/…`` (achilles.scim.views), imported with the first SCIM request rather than with the
    URLconf: scim2-models builds its pydantic models at import, reading each one's attribute
    docstrings from source through ``inspect.getmodule`` over every loaded module — 2.5 s of a
    fresh daphne's first request on a quiet machine, ~10 s in a test process under load."""
    from achilles.scim.views import scim_endpoint as serve  # noqa: PLC0415 — see the docstring

    return serve(request, path)


urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("metrics", metrics_view, name="metrics"),
    # the pages' scripts' texts in the reader's language (locale/*/LC_MESSAGES/djangojs.po)
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("admin/", admin.site.urls),
    path("api/chat", chat_sse, name="chat-sse"),
    path("api/", api.urls),
    # SCIM 2.0 for identity providers: its own token and error shape (achilles.scim, docs/scim.md)
    re_path(r"^scim/v2(?:/(?P<path>.*))?$", scim_endpoint, name="scim"),
    path("accounts/login/", views.SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # OpenID Connect: only the providers' login and callback (no allauth sign-up or e-mail pages);
    # allauth's own redirects to its sign-in page land on the product's.
    path("accounts/", include("allauth.socialaccount.providers.openid_connect.urls")),
    path("accounts/login/", views.SignInView.as_view(), name="account_login"),
    path("accounts/oidc/cancelled/", views.oidc_cancelled, name="socialaccount_login_cancelled"),
    path("settings/", views.settings_page, name="settings"),
    path("tokens/", views.tokens_page, name="tokens"),
    path("agents/", agents_page, name="agents"),
    path("chat/", chat_page, name="chat"),
    path("chat/shared/<uuid:conversation_id>/", shared_page, name="chat-shared"),
    path("knowledge/", knowledge_page, name="knowledge"),
    path("hub/", hub_page, name="hub"),
    path("usage/", include("usage.urls")),
    path("", home, name="home"),
]

handler500 = "achilles.views.server_error"
