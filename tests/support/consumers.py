"""
Consumers over a local engine with one open connection, for the tests of
subscriptions' attachment and settling (``tests/broker/clients/``).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from stompbroker.broker.clients.connections import ConnectionRegistry
from stompbroker.broker.clients.consumers import Consumers
from stompbroker.broker.clients.transactions import Transactions
from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.flow.backpressure import BackPressure
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.protocol.message import Message
from tests.support.broker import FakeConnection, Inbox


class World:
    """Consumers over a local engine, with one open connection."""

    def __init__(self, policy: DeliveryPolicy | None = None) -> None:
        policy = policy if policy is not None else DeliveryPolicy()
        self.clock = Clock()
        self.engine = LocalEngine(self.clock, policy=policy)
        limits = Limits(memory_high=0)
        self.registry = ConnectionRegistry(
            limits, self.engine.traffic, self.engine.ids, self.engine
        )
        backpressure = BackPressure(Clock(), limits, self.engine.counters, set())
        self.transactions = Transactions(self.registry, limits, backpressure)
        self.consumers = Consumers(self.engine, self.registry, self.transactions, policy)
        self.connection = FakeConnection()
        self.registry.open(self.connection)

    def subscribe(self, destination: str, ack_mode: str = "client-individual", **kw: Any) -> Inbox:
        inbox = Inbox(destination, ack_mode, connection=self.connection, **kw)
        self.consumers.subscribe(inbox)
        return inbox

    def send(self, destination: str, *bodies: bytes) -> None:
        for body in bodies:
            message = Message(destination, body.decode(), (), body)
            if destination.startswith("/topic/"):
                self.engine.publish_topic(message)
            else:
                self.engine.publish_queue(message)
