"""One ASGI application: HTTP (Django, SSE included) and websockets (Channels)."""

import os

import django

from achilles.bootstrap import bootstrap

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
bootstrap()
django.setup(set_prefix=False)  # as get_asgi_application() does

from achilles.compat import daphne_leave_request_bodies_to_the_app  # noqa: E402
from achilles.inline_middleware import InlineHooksASGIHandler  # noqa: E402

# Multipart bodies reach the app unparsed by daphne's HTTP layer (why: achilles.compat).
daphne_leave_request_bodies_to_the_app()

# Django's handler, its own middleware without a thread hop per hook (achilles.inline_middleware).
django_asgi_app = InlineHooksASGIHandler()

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
