from django.urls import path

from usage.pages import usage_me_page, usage_page

urlpatterns = [
    path("", usage_page, name="usage"),
    path("me/", usage_me_page, name="usage-me"),
]
