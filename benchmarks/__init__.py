"""Micro-benchmarks of the broker's hot paths; each runs as ``python -m benchmarks.NAME``."""
