"""
Duplicate detection through sessions on a broker, without sockets: a SEND whose
destination saw its duplicate-detection id within the window gets its RECEIPT
and is not routed again; in a transaction the id counts at COMMIT; the ids of
persistent messages come back with the SQLite store after a restart.
"""

from __future__ import annotations

from pathlib import Path

from twisted.internet.task import Clock

from stompbroker.broker.features.policies import parse_policy
from stompbroker.broker.service import Broker
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.session import SessionConfig
from tests.support.broker import Client
from tests.support.store import result_of, sqlite_store


def started(clock: Clock, **options: object) -> Broker:
    broker = Broker(clock, **options)  # type: ignore[arg-type]
    broker.startService()
    clock.advance(0)
    result_of(broker.when_ready())
    return broker


def stop(broker: Broker, clock: Clock) -> None:
    stopped = broker.stopService()
    clock.pump([1.0] * 30)
    result_of(stopped)


def queued(broker: Broker, destination: str = "/queue/q") -> list[bytes]:
    queue = broker.engine.queues.get(destination)
    return [] if queue is None else [message.body for message in queue.pending]


def receipts(frames: list[Frame]) -> list[str | None]:
    assert all(frame.command == "RECEIPT" for frame in frames), frames
    return [frame.get("receipt-id") for frame in frames]


def test_a_repeated_send_gets_its_receipt_and_is_not_queued_again() -> None:
    """The retry of a SEND, same id, same destination: RECEIPT, and one message in the queue."""
    clock = Clock()
    broker = started(clock)
    client = Client(broker, clock, config=SessionConfig())
    for receipt in ("r1", "r2"):
        client.send_frame(
            "SEND", b"once", destination="/queue/q", receipt=receipt, **{"duplicate-id": "a-1"}
        )
    assert receipts(client.frames()) == ["r1", "r2"]
    assert queued(broker) == [b"once"]
    counted = broker.engine.bookkeeping().traffic.destinations["/queue/q"]
    assert (counted.messages_in, counted.messages_duplicate) == (1, 1)


def test_artemis_header_and_other_destinations_and_ids() -> None:
    """``_AMQ_DUPL_ID`` is read too; an id is per destination; other ids pass."""
    clock = Clock()
    broker = started(clock)
    client = Client(broker, clock, config=SessionConfig())
    sends = [("/queue/q", "x", b"1"), ("/queue/q", "x", b"2"), ("/queue/q", "y", b"3")]
    sends.append(("/queue/other", "x", b"4"))
    for destination, duplicate_id, body in sends:
        client.send_frame("SEND", body, (("_AMQ_DUPL_ID", duplicate_id),), destination=destination)
    assert queued(broker) == [b"1", b"3"]
    assert queued(broker, "/queue/other") == [b"4"]


def test_topic_subscribers_get_a_repeated_send_once() -> None:
    """A topic's window drops the repeat before the fan-out."""
    clock = Clock()
    broker = started(clock)
    subscriber = Client(broker, clock, config=SessionConfig())
    subscriber.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    publisher = Client(broker, clock, config=SessionConfig())
    for _ in range(2):
        publisher.send_frame("SEND", b"tick", destination="/topic/t", **{"duplicate-id": "t-1"})
    assert [frame.body for frame in subscriber.messages()] == [b"tick"]


def test_the_window_is_bounded_by_the_policy() -> None:
    """A policy's duplicate-window-ids and duplicate-window bound what is remembered."""
    clock = Clock()
    policy = parse_policy(
        "dedup", {"pattern": "q", "duplicate-window-ids": 2, "duplicate-window": 10_000}
    )
    broker = started(clock, policies=(policy,))
    client = Client(broker, clock, config=SessionConfig())

    def send(duplicate_id: str, body: bytes) -> None:
        client.send_frame("SEND", body, destination="/queue/q", **{"duplicate-id": duplicate_id})

    send("a", b"a1")
    send("b", b"b1")
    send("c", b"c1")  # "a" leaves the window: two ids at most
    send("a", b"a2")
    send("c", b"c2")
    clock.advance(10)  # every id leaves the window
    send("c", b"c3")
    assert queued(broker) == [b"a1", b"b1", b"c1", b"a2", b"c3"]


def test_in_a_transaction_the_id_counts_at_commit() -> None:
    """
    An aborted transaction's SEND leaves no id behind; a committed one's repeat in a later
    transaction is dropped at that COMMIT.
    """
    clock = Clock()
    broker = started(clock)
    client = Client(broker, clock, config=SessionConfig())
    headers = {"duplicate-id": "t-1"}
    client.send_frame("BEGIN", transaction="t1")
    client.send_frame("SEND", b"aborted", destination="/queue/q", transaction="t1", **headers)
    client.send_frame("ABORT", transaction="t1")
    client.send_frame("BEGIN", transaction="t2")
    client.send_frame("SEND", b"committed", destination="/queue/q", transaction="t2", **headers)
    client.send_frame("BEGIN", transaction="t3")
    client.send_frame("SEND", b"repeat", destination="/queue/q", transaction="t3", **headers)
    client.send_frame("COMMIT", transaction="t2")
    client.send_frame("COMMIT", transaction="t3", receipt="c3")
    assert receipts(client.frames()) == ["c3"]
    assert queued(broker) == [b"committed"]


def test_ids_of_persistent_messages_survive_a_restart(tmp_path: Path) -> None:
    """
    The SQLite store keeps a persistent message's id with it, even once the message is
    consumed: after a restart the retry is still a repeat; a non-persistent one's id is gone.
    """
    clock = Clock()
    store = sqlite_store(tmp_path, clock)
    broker = started(clock, store=store)
    client = Client(broker, clock, config=SessionConfig())
    client.send_frame(
        "SEND", b"kept", destination="/queue/q", persistent="true", **{"duplicate-id": "p-1"}
    )
    client.send_frame("SEND", b"memory", destination="/queue/m", **{"duplicate-id": "m-1"})
    clock.advance(0)
    consumer = Client(broker, clock, config=SessionConfig())
    consumer.send_frame("SUBSCRIBE", id="s", destination="/queue/q", ack="client-individual")
    clock.advance(0)
    [delivered] = consumer.messages()
    consumer.ack(delivered)
    clock.advance(0)
    stop(broker, clock)

    clock = Clock()
    store = sqlite_store(tmp_path, clock)
    broker = started(clock, store=store)
    client = Client(broker, clock, config=SessionConfig())
    client.send_frame(
        "SEND",
        b"retry",
        destination="/queue/q",
        persistent="true",
        receipt="r",
        **{"duplicate-id": "p-1"},
    )
    client.send_frame("SEND", b"memory again", destination="/queue/m", **{"duplicate-id": "m-1"})
    clock.advance(0)
    assert receipts(client.frames()) == ["r"]
    assert queued(broker) == []
    assert queued(broker, "/queue/m") == [b"memory again"]
    stop(broker, clock)


def test_a_scheduled_message_fires_once_and_its_repeat_is_dropped() -> None:
    """The id counts when the SEND is scheduled: the firing is delivered, a repeat is not."""
    clock = Clock()
    broker = started(clock)
    client = Client(broker, clock, config=SessionConfig())
    for body in (b"scheduled", b"repeat"):
        client.send_frame(
            "SEND",
            body,
            (("AMQ_SCHEDULED_DELAY", "1000"),),
            destination="/queue/q",
            **{"duplicate-id": "s-1"},
        )
    clock.advance(1.0)
    assert queued(broker) == [b"scheduled"]


def test_a_repeat_sent_while_the_first_is_stored_gets_its_receipt_once_it_is(
    tmp_path: Path,
) -> None:
    """
    The RECEIPT of a repeat means what the first one's does: the message is stored. While
    the first write is pending, the repeat's RECEIPT waits for it.
    """
    clock = Clock()
    store = sqlite_store(tmp_path, clock)
    broker = started(clock, store=store)
    first = Client(broker, clock, config=SessionConfig())
    repeat = Client(broker, clock, config=SessionConfig())
    for client, receipt in ((first, "r1"), (repeat, "r2")):
        client.send_frame(
            "SEND",
            b"kept",
            destination="/queue/q",
            persistent="true",
            receipt=receipt,
            **{"duplicate-id": "p-1"},
        )
    assert first.frames() == [] and repeat.frames() == []
    clock.advance(0)
    assert receipts(first.frames()) == ["r1"]
    assert receipts(repeat.frames()) == ["r2"]
    assert queued(broker) == [b"kept"]
    stop(broker, clock)
