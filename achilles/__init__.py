"""Achilles: the project package and platform core."""

# The release: the one place it is written (/api/version, the MCP server's serverInfo, CHANGELOG.md follow it).
__version__ = "0.1.0"
