"""Achilles: the project package and platform core."""
