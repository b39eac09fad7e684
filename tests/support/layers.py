"""
The package's layers, lowest first, as ARCHITECTURE.md stacks them: the
layering tests enforce the order, and the architecture map's picture shows it.
"""

from __future__ import annotations

#: The layers, lowest first.
LAYERS = ("protocol", "broker", "security", "transport", "stats", "web", "app")
