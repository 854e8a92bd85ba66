"""A strict Confluence Server/Data Center REST v1 emulator for tests and the local demo.

``python -m emulators.confluence --port N [--demo]``. Stdlib only; imports no Django. ``store.py``
holds the state, the view rule and the JSON shapes; ``server.py`` the routes, auth and faults;
``cql.py`` the CQL subset; ``demo.py`` the demo space. See docs/confluence-emulator.md.
"""

from emulators.confluence.server import ConfluenceServer, serve
from emulators.confluence.store import ConfluenceHttpError, ConfluenceStore, Faults

__all__ = ["ConfluenceHttpError", "ConfluenceServer", "ConfluenceStore", "Faults", "serve"]
