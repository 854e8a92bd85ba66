"""Achilles: the project package and platform core."""

__version__ = "1.0"  # the product's version (serverInfo of the MCP server, the API document)
