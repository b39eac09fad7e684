"""
What ends a shared queue's entries (stompbroker.broker.engine.redis.queue_settling),
with a recording writer: here, entries read that hold no message a node can read,
and what an ACK settles.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet.defer import Deferred, succeed

from stompbroker.broker.engine.redis.codec import encode_entry
from stompbroker.broker.engine.redis.keys import Keys, record_key
from stompbroker.broker.engine.redis.queue_settling import QueueSettling
from stompbroker.broker.engine.redis.settle_scripts import SETTLE
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters
from stompbroker.protocol.message import Message

STREAM = "test:{q:/queue/a}"


class Loop:
    """Runs what is called soon when told to (a turn of the loop)."""

    def __init__(self) -> None:
        self.soon: list[Any] = []

    def call_soon(self, call: Any) -> None:
        self.soon.append(call)

    def turn(self) -> None:
        soon, self.soon = self.soon, []
        for call in soon:
            call()


class Engine:
    """What the settling uses of the engine; its writer records the commands."""

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []
        self.writer = SimpleNamespace(
            command=lambda *args: self.commands.append(args), command_waited=self._waited
        )
        self.names = Keys("test")
        self.ids = SimpleNamespace(node="n2")
        self.liveness = SimpleNamespace(key="test:alive:n2", epoch="7", lapsing=lambda: False)
        self.limits = SimpleNamespace(of=lambda destination: None)
        self.counters = DeliveryCounters()
        self.traffic = Traffic()
        self.loop = Loop()

    def _waited(self, *args: Any) -> Deferred[Any]:
        self.commands.append(args)
        return succeed([])


class Queue:
    destination = "/queue/a"
    aside = None

    def lane(self, message: Message) -> str:
        return STREAM


def entry(message_id: str) -> dict[bytes, bytes]:
    return {b"m": encode_entry("n1", Message("/queue/a", message_id, b"k:v", b"body"))}


def test_an_unreadable_entry_is_ended_and_counted_and_the_others_are_taken() -> None:
    """Damaged bytes or a missing field never stop the read: the rest of it goes on."""
    engine = Engine()
    settling = QueueSettling(engine, STREAM, Queue())
    entries = [
        (b"1-0", entry("n1-1")),
        (b"2-0", {b"m": b"M\x00garbage"}),
        (b"3-0", {b"other": b"x"}),
        (b"4-0", {b"m": b"[not json"}),
        (b"5-0", entry("n1-2")),
    ]
    fresh = settling.fresh(entries, None, None)
    assert [(entry_id, message.message_id) for entry_id, _, message in fresh] == [
        (b"1-0", "n1-1"),
        (b"5-0", "n1-2"),
    ]
    assert engine.counters.discarded == 3
    assert engine.traffic.of("/queue/a").messages_dropped == 3
    keys = (STREAM, record_key("n2", STREAM), "test:alive:n2")
    assert engine.commands == [
        ("EVALSHA", SETTLE, 3, *keys, "nodes", "n2", 0, "7", b"2-0", b"3-0", b"4-0"),
    ]


def test_an_acks_entries_end_together_and_are_not_delivered_again() -> None:
    """
    The messages of ACKs in one turn end in one script; Redis handing out a
    settled entry again (a roll-back), or a copy of its message under another
    entry id, ends it instead of delivering it; settle_all says whether any
    message was persistent (the RECEIPT then waits for Redis).
    """
    engine = Engine()
    settling = QueueSettling(engine, STREAM, Queue())
    read = [(b"1-0", entry("n1-1")), (b"2-0", entry("n1-2")), (b"3-0", entry("n1-3"))]
    fresh = settling.fresh(read, None, None)
    for entry_id, _, message in fresh:
        settling.hold(message.message_id, entry_id)
    first, second, third = (message for _, _, message in fresh)
    third.persistent = True
    assert settling.settle_all([first]) is False
    assert settling.settle_all([second, first]) is False
    assert settling.settle_all([third]) is True
    engine.loop.turn()
    keys = (STREAM, record_key("n2", STREAM), "test:alive:n2")
    settled = ("EVALSHA", SETTLE, 3, *keys, "nodes", "n2", 0, "7")
    assert engine.commands == [(*settled, b"1-0", b"2-0", b"3-0")]
    assert settling.held() == {}
    engine.commands.clear()
    again = [(b"2-0", entry("n1-2")), (b"9-0", entry("n1-1")), (b"10-0", entry("n1-10"))]
    assert [message.message_id for _, _, message in settling.fresh(again, None, None)] == ["n1-10"]
    assert engine.commands == [(*settled, b"2-0", b"9-0")]
