"""
stompbroker: a STOMP 1.0/1.1/1.2 message broker on Twisted.

The embedding API::

    broker = Broker(reactor)
    broker.startService()
    endpoint.listen(stomp_server_factory(broker))
    root.putChild(b"ws", stomp_websocket_resource(broker))  # on any twisted.web site
    broker.publish("/topic/news", "hello")

The names above are imported on first use (a module ``__getattr__``), so that
importing a module of the package that needs no Twisted, such as
:mod:`stompbroker.stats.schema` on a Spark driver, does not load the broker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from stompbroker.broker.flow.broker_limits import Limits
    from stompbroker.broker.queueing.delivery import DeliveryPolicy
    from stompbroker.broker.service import Broker
    from stompbroker.protocol.session import SessionConfig
    from stompbroker.transport.tcp import stomp_server_factory
    from stompbroker.transport.websocket import WebSocketConfig, stomp_websocket_resource

#: Each public name, and the module it comes from.
_EXPORTS = {
    "Broker": "stompbroker.broker.service",
    "DeliveryPolicy": "stompbroker.broker.queueing.delivery",
    "Limits": "stompbroker.broker.flow.broker_limits",
    "SessionConfig": "stompbroker.protocol.session",
    "WebSocketConfig": "stompbroker.transport.websocket",
    "stomp_server_factory": "stompbroker.transport.tcp",
    "stomp_websocket_resource": "stompbroker.transport.websocket",
}

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


def __getattr__(name: str) -> Any:
    """
    Import a public name from its module on first use, and keep it here.

    :raises AttributeError: for a name the package does not export.
    """
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stompbroker' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
