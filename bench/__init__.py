"""Benchmarks (not tests). Each ``bench/<name>.py`` or ``bench/<name>/__init__.py`` has ``main()``."""
