"""Websocket routes of every app (Channels); apps append their patterns here."""

websocket_urlpatterns: list = []
