from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from achilles import views
from achilles.api import api
from achilles.home import home
from achilles.metrics import metrics_view
from achilles.scim.views import scim_endpoint
from agents.pages import agents_page
from conversations.pages import chat_page, shared_page
from conversations.views import chat_sse
from hub.pages import hub_page
from knowledge.pages import knowledge_page

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("metrics", metrics_view, name="metrics"),
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
