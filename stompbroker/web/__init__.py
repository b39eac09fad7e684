"""
The web port: the twisted.web site with the WebSocket endpoint, health, stats,
metrics, the dashboard and the static files.

May import every layer below the app: protocol, broker, transport, security and
stats; never :mod:`stompbroker.app`.
"""
