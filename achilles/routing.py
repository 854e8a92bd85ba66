"""Websocket routes of every app (Channels); apps append their patterns here."""

websocket_urlpatterns: list = []

from django.urls import path  # noqa: E402

from conversations.consumers import ChatConsumer  # noqa: E402

websocket_urlpatterns.append(path("ws/chat/", ChatConsumer.as_asgi()))
