"""
A topic subscriber on a socket-free session, and deliveries of a known size:
for the tests of slow consumers and their advisories.
"""

from __future__ import annotations

import socket
from typing import Any

from stompbroker.protocol.message import Message
from stompbroker.protocol.session import SessionConfig
from tests.support.clients import Collector, RawClient, connect, raw_connect
from tests.support.session import connected, subscribe

#: Where the broker publishes its slow-consumer advisories.
ADVISORY_TOPIC = "/topic/stompbroker.advisory.slow-consumer"


def topic_subscriber(**settings: Any) -> tuple[Any, Any, Any, Any, Any]:
    """:returns: a connected session with an auto-ack topic subscription, and the subscription."""
    config = SessionConfig(heartbeat=(0, 0), **settings)
    session, transport, clock, broker = connected(config=config)
    subscription = subscribe(session, transport, ("id", "t"), ("destination", "/topic/t"))
    return session, transport, clock, broker, subscription


#: Bytes of each MESSAGE frame :func:`deliver` makes.
MESSAGE_SIZE = 180


def deliver(subscription: Any, *numbers: int) -> None:
    """Deliver one topic message of :data:`MESSAGE_SIZE` bytes per number."""
    for number in numbers:
        subscription.deliver(Message("/topic/t", f"m{number}", (), b"%03d" % number + b"x" * 97))


def stall_and_flood(
    address: tuple[str, int], destination: str
) -> tuple[Any, Collector, RawClient, RawClient]:
    """
    Watch the advisory topic; subscribe a client that never reads (a small
    receive buffer) to ``destination``; publish 20 MB of 1000-byte messages
    there and wait until the broker has read them all.

    :returns: the operator's connection and what it receives, the stalled
        client, the publisher.
    """
    operator, advisories = connect(address)
    operator.subscribe(ADVISORY_TOPIC, id="ops", receipt="watching")
    assert advisories.wait_for(lambda: "watching" in advisories.receipts)
    stalled = raw_connect(address)
    stalled.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    assert stalled.subscribe(destination).command == "RECEIPT"
    publisher = raw_connect(address)
    frame = f"SEND\ndestination:{destination}\n\n".encode() + b"x" * 1000 + b"\x00"
    for _ in range(200):
        publisher.send(frame * 100)
    publisher.send(b"DISCONNECT\nreceipt:done\n\n\x00")
    assert publisher.read_frames(count=1, timeout=30)[0].command == "RECEIPT"
    return operator, advisories, stalled, publisher
