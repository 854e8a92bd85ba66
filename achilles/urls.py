from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from achilles import views
from achilles.api import api
from achilles.home import home
from achilles.metrics import metrics_view
from agents.pages import agents_page
from conversations.pages import chat_page
from conversations.views import chat_sse

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/chat", chat_sse, name="chat-sse"),
    path("api/", api.urls),
    path("accounts/login/", auth_views.LoginView.as_view(template_name="registration/login.html"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tokens/", views.tokens_page, name="tokens"),
    path("agents/", agents_page, name="agents"),
    path("chat/", chat_page, name="chat"),
    path("usage/", include("usage.urls")),
    path("", home, name="home"),
]

handler500 = "achilles.views.server_error"
