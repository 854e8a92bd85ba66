"""The sync agent's version: a positive integer, shown as ``v1``; a publication carries its own copy."""

VERSION = 1
