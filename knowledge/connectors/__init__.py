"""Connectors: sources the store pulls knowledge from on a schedule (a Confluence Data Center, …).

Part of the store itself: other apps keep using ``knowledge.facade``. ``base`` holds the
framework (credentials at rest, runs, checkpoints); each source type is a package of its own.
"""
