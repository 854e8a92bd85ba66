"""A stateful Jira Server/Data Center REST emulator for tests and the local demo (``python -m emulators.jira``).

Stdlib only; imports no Django. See ``server.py`` for the admin (fault injection) routes and
``store.py`` for the state and shapes.
"""

from emulators.jira.demo import build_store
from emulators.jira.server import EmulatorServer, serve, start_in_thread

__all__ = ["EmulatorServer", "build_store", "serve", "start_in_thread"]
