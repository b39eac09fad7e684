"""The ``twistd stompbroker`` plugin: one ServiceMaker, nothing else."""

from twisted.application.service import ServiceMaker

StompBroker = ServiceMaker(
    "STOMP broker",
    "stompbroker.app.plugin",
    "A STOMP 1.0-1.2 message broker over TCP, TLS and WebSocket.",
    "stompbroker",
)
