"""One ASGI application: HTTP (Django, SSE included) and websockets (Channels)."""

import os

from django.core.asgi import get_asgi_application

from achilles.bootstrap import bootstrap

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
bootstrap()
django_asgi_app = get_asgi_application()

from achilles.security import production_guard  # noqa: E402

production_guard()  # ACHILLES_ENV=production: no demo accounts, no demo passwords

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from achilles.routing import websocket_urlpatterns  # noqa: E402
from achilles.ws_origin import SameOriginValidator  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
