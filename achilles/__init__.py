"""Achilles: the project package and platform core."""

# The release: the one place it is written (pyproject.toml, /api/version and CHANGELOG.md follow it).
__version__ = "0.1.0"
