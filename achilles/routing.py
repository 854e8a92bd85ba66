"""Websocket routes of every app (Channels)."""

from django.urls import path

from conversations.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/chat/", ChatConsumer.as_asgi()),
]
