"""
Sessions on a broker with an SQLite store, frames in and frames out, without
sockets: what a client sees while its persistent messages are being stored.

The store's writer runs synchronously on a ``task.Clock``: what is written in a
reactor turn is committed when ``clock.advance(0)`` ends the turn, so each test
can look at the session before and after the store has caught up.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.service import Broker
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.session import SessionConfig
from tests.support.broker import Client as SessionClient
from tests.support.store import result_of, sqlite_store


class Client(SessionClient):
    """A STOMP 1.2 session whose transport also records when reading stops and resumes."""

    def __init__(self, broker: Broker, clock: Clock, config: SessionConfig) -> None:
        self.reading = True
        super().__init__(broker, clock, config=config)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def receipts(self) -> list[str]:
        frames = self.frames()
        assert all(frame.command == "RECEIPT" for frame in frames), frames
        return [frame.get("receipt-id") or "" for frame in frames]


class World:
    """A broker on an SQLite store whose writes land when the test says."""

    def __init__(self, data_dir: Path) -> None:
        self.clock = Clock()
        self.store = sqlite_store(data_dir, self.clock)
        self.broker = Broker(self.clock, store=self.store)
        self.broker.startService()
        self.clock.advance(0)
        result_of(self.broker.when_ready())

    def client(self, config: SessionConfig | None = None) -> Client:
        return Client(self.broker, self.clock, config or SessionConfig())

    def settle(self) -> None:
        """Let the store commit what is pending (and fire what waits for it)."""
        self.clock.advance(0)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    built = World(tmp_path)
    yield built
    built.settle()
    result_of(built.store.close())


def persistent_send(client: Client, body: bytes = b"m", **headers: str) -> None:
    client.send_frame("SEND", body, destination="/queue/q", persistent="true", **headers)


def test_receipt_of_a_persistent_send_waits_until_it_is_stored(world: World) -> None:
    """
    The issue's rule: a persistent SEND is durable before its RECEIPT (STOMP 1.2, "Header receipt").
    """
    client = world.client()
    persistent_send(client, receipt="r1")
    assert client.frames() == []
    world.settle()
    assert client.receipts() == ["r1"]
    assert len(world.broker.engine.queues["/queue/q"].pending) == 1


def test_receipts_keep_the_order_of_the_frames_they_answer(world: World) -> None:
    """A receipt that needs no store write waits behind an earlier one that does."""
    client = world.client()
    persistent_send(client, receipt="r1")
    client.send_frame("SEND", b"x", destination="/queue/other", receipt="r2")
    client.send_frame("SUBSCRIBE", id="s", destination="/topic/t", receipt="r3")
    assert client.frames() == []
    world.settle()
    assert client.receipts() == ["r1", "r2", "r3"]
    client.send_frame("SEND", b"x", destination="/queue/other", receipt="r4")
    assert client.receipts() == ["r4"]


def test_later_frames_are_handled_while_the_message_is_stored(world: World) -> None:
    """
    Issue 17: the session reads on while a persistent SEND is being stored; only what must wait
    for it (a later RECEIPT) waits.
    """
    client = world.client()
    persistent_send(client)
    client.send_frame("SEND", b"after", destination="/queue/later")
    client.send_frame("SUBSCRIBE", id="s", destination="/topic/t", receipt="r")
    assert [m.body for m in world.broker.engine.queues["/queue/later"].pending] == [b"after"]
    assert client.frames() == []
    world.settle()
    assert client.receipts() == ["r"]


def test_frames_arriving_while_the_session_waits_are_handled_in_order(world: World) -> None:
    """Frames that come in later chunks, while a store write is pending, wait their turn."""
    client = world.client()
    persistent_send(client, b"1")
    persistent_send(client, b"2")
    client.send_frame("DISCONNECT", receipt="bye")
    assert (client.frames(), client.closed) == ([], False)
    world.settle()
    assert client.receipts() == ["bye"]
    assert client.closed
    assert [m.body for m in world.broker.engine.queues["/queue/q"].pending] == [b"1", b"2"]


def test_disconnect_receipt_comes_after_the_receipts_it_follows(world: World) -> None:
    """
    STOMP 1.2, "DISCONNECT": its receipt means every earlier frame was handled, so it waits too.
    """
    client = world.client()
    persistent_send(client, receipt="r1")
    client.send_frame("DISCONNECT", receipt="bye")
    assert (client.frames(), client.closed) == ([], False)
    world.settle()
    assert client.receipts() == ["r1", "bye"]
    assert client.closed


def test_commit_receipt_waits_for_the_persistent_messages_of_the_transaction(world: World) -> None:
    """STOMP 1.2, "COMMIT": the messages a transaction sends are stored before COMMIT's receipt."""
    client = world.client()
    client.send_frame("BEGIN", transaction="t")
    persistent_send(client, transaction="t", receipt="sent")
    assert client.receipts() == ["sent"]
    client.send_frame("COMMIT", transaction="t", receipt="committed")
    assert client.frames() == []
    world.settle()
    assert client.receipts() == ["committed"]


def test_ack_receipt_waits_until_the_message_cannot_come_back(world: World) -> None:
    """
    An ACK's receipt is sent once the removal is durable, which in batch mode may wait up to
    batch_delay for company (the removal is lazy); an ACK without one holds nothing up.
    """
    client = world.client()
    client.send_frame("SUBSCRIBE", id="s", destination="/queue/q", ack="client-individual")
    persistent_send(client, b"1", receipt="r1")
    persistent_send(client, b"2", receipt="r2")
    world.settle()
    frames = client.frames()
    assert [f.get("receipt-id") for f in frames if f.command == "RECEIPT"] == ["r1", "r2"]
    first, second = [f for f in frames if f.command == "MESSAGE"]
    client.ack(first, receipt="acked")
    world.settle()
    assert client.frames() == []
    world.clock.advance(0.002)
    assert client.receipts() == ["acked"]
    client.ack(second)
    client.send_frame("SEND", b"x", destination="/queue/other")
    assert "/queue/other" in world.broker.engine.queues
    world.clock.advance(0.002)
    assert world.store.stats.operations >= 6
    recovering = world.store.recover()
    world.settle()
    assert result_of(recovering).queues == {}


def test_a_message_the_store_refuses_gets_an_error_not_a_receipt(world: World) -> None:
    """
    If the store cannot take the message, the client gets an ERROR naming its receipt, then a close.
    """
    client = world.client()
    world.settle()
    result_of(world.store.close())
    persistent_send(client, receipt="r1")
    world.settle()
    [error] = client.frames()
    assert (error.command, error.get("message"), error.get("receipt-id")) == (
        "ERROR",
        "message not stored",
        "r1",
    )
    assert client.closed


def test_a_full_write_window_stops_reading_until_the_store_catches_up(world: World) -> None:
    """
    Reading stays bounded: at max_pending_write_bytes of bodies being stored the session pauses
    its transport, and reads again once they are stored.
    """
    client = world.client(SessionConfig(max_pending_write_bytes=1000))
    persistent_send(client, b"x" * 400)
    persistent_send(client, b"x" * 400)
    assert client.reading
    persistent_send(client, b"x" * 400)
    assert not client.reading
    world.settle()
    assert client.reading
    assert len(world.broker.engine.queues["/queue/q"].pending) == 3


def test_a_session_gone_while_waiting_gets_nothing_more(world: World) -> None:
    """
    A connection lost before the store catches up is answered nothing; what it sent is kept: its
    persistent messages are stored all the same.
    """
    client = world.client()
    persistent_send(client, b"1", receipt="r1")
    persistent_send(client, b"2")
    client.send_frame("SEND", b"after", destination="/queue/later")
    client.session.connection_lost()
    world.settle()
    assert client.frames() == []
    assert [m.body for m in world.broker.engine.queues["/queue/later"].pending] == [b"after"]
    recovering = world.store.recover()
    world.settle()
    assert [m.body for m in result_of(recovering).queues["/queue/q"]] == [b"1", b"2"]


def test_a_store_that_answers_at_once_is_handled_inside_the_frame() -> None:
    """
    With a memory store the write is done by the time send() returns: nothing waits, nothing is
    held.
    """
    clock = Clock()
    broker = Broker(clock, store=MemoryStore())
    broker.startService()
    client = Client(broker, clock, SessionConfig())
    persistent_send(client)
    persistent_send(client, receipt="r")
    client.send_frame("DISCONNECT", receipt="bye")
    assert client.receipts() == ["r", "bye"]
    assert client.closed
    assert len(broker.engine.queues["/queue/q"].pending) == 2


def test_receipt_frames_are_plain_receipts(world: World) -> None:
    """A held receipt is the same RECEIPT frame an immediate one would have been."""
    client = world.client()
    persistent_send(client, receipt="r1")
    world.settle()
    assert client.frames() == [Frame("RECEIPT", (("receipt-id", "r1"),))]


def test_subscribe_receipt_behind_a_store_write_still_precedes_its_messages(world: World) -> None:
    """
    Issue 14: when a SUBSCRIBE's RECEIPT waits behind a persistent SEND's, the messages the
    subscription is given meanwhile wait for it too: RECEIPTs first, in order, then the MESSAGE.
    """
    world.broker.publish("/queue/waiting", b"waiting")
    client = world.client()
    persistent_send(client, b"kept", receipt="stored")
    client.send_frame("SUBSCRIBE", id="s", destination="/queue/waiting", receipt="live")
    assert client.frames() == []
    world.settle()
    frames = client.frames()
    assert [(f.command, f.get("receipt-id") or f.body) for f in frames] == [
        ("RECEIPT", "stored"),
        ("RECEIPT", "live"),
        ("MESSAGE", b"waiting"),
    ]
