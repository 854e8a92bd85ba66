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
from hub.mcp.http import McpRouter  # noqa: E402
from hub.notify import hub_boot_mark  # noqa: E402

# The hub's boot marker: until the sync agent claims again, agent_status says the launcher is unknown.
hub_boot_mark()

application = ProtocolTypeRouter(
    {
        # /mcp/ is the hub's MCP server (streamable HTTP); everything else is Django.
        "http": McpRouter(django_asgi_app),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
