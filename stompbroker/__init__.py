"""
stompbroker: a STOMP 1.0/1.1/1.2 message broker on Twisted.

The embedding API::

    broker = Broker(reactor)
    broker.startService()
    endpoint.listen(stomp_server_factory(broker))
    root.putChild(b"ws", stomp_websocket_resource(broker))  # on any twisted.web site
    broker.publish("/topic/news", "hello")
"""

__version__ = "0.1.0"

from stompbroker.broker.delivery import DeliveryPolicy  # noqa: E402
from stompbroker.broker.service import Broker, Limits  # noqa: E402
from stompbroker.protocol.session import SessionConfig  # noqa: E402
from stompbroker.transport.tcp import stomp_server_factory  # noqa: E402
from stompbroker.transport.websocket import (  # noqa: E402
    WebSocketConfig,
    stomp_websocket_resource,
)

__all__ = [
    "Broker",
    "DeliveryPolicy",
    "Limits",
    "SessionConfig",
    "WebSocketConfig",
    "stomp_server_factory",
    "stomp_websocket_resource",
    "__version__",
]
