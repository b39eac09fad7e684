"""
A topic subscriber on a socket-free session, and deliveries of a known size:
for the tests of slow consumers and their advisories.
"""

from __future__ import annotations

from typing import Any

from stompbroker.protocol.message import Message
from stompbroker.protocol.session import SessionConfig
from tests.support.session import connected, subscribe


def topic_subscriber(**settings: Any) -> tuple[Any, Any, Any, Any, Any]:
    """:returns: a connected session with an auto-ack topic subscription, and the subscription."""
    config = SessionConfig(heartbeat=(0, 0), **settings)
    session, transport, clock, broker = connected(config=config)
    subscription = subscribe(session, transport, ("id", "t"), ("destination", "/topic/t"))
    return session, transport, clock, broker, subscription


#: Bytes of each MESSAGE frame :func:`deliver` makes.
MESSAGE_SIZE = 179


def deliver(subscription: Any, *numbers: int) -> None:
    """Deliver one topic message of :data:`MESSAGE_SIZE` bytes per number."""
    for number in numbers:
        subscription.deliver(Message("/topic/t", f"m{number}", (), b"%03d" % number + b"x" * 97))
