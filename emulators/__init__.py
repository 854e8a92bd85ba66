"""Emulators of the remote systems Achilles talks to (Jira, Confluence), for tests and the local demo."""
