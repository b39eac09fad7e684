"""
A client that does not read as fast as it is written to
(stompbroker.protocol.slow_consumer): the write grace, the backlog and what it
keeps, and the three slow-consumer policies, with the transport's
``pause_writing``/``resume_writing`` called by hand, against the recording broker.
"""

from __future__ import annotations

from typing import Any

from stompbroker.protocol.advisory import ADVISORY_HEADER
from stompbroker.protocol.session import State
from tests.support.session import error_of, frame
from tests.support.slow_consumers import MESSAGE_SIZE, deliver, topic_subscriber


def delivered(transport: Any) -> list[str | None]:
    """
    :returns: the message ids of the MESSAGE frames written since the last look,
        advisories aside (test_slow_consumer_advisory.py is about those).
    """
    return [
        f.get("message-id")
        for f in transport.frames()
        if f.command == "MESSAGE" and f.get(ADVISORY_HEADER) is None
    ]


def test_a_full_transport_is_written_to_for_the_grace_then_the_backlog_takes_over() -> None:
    """
    A burst that fills the transport's buffer goes on to it for write_grace bytes; past that the
    client is behind: writes wait in the backlog and the broker pauses its queue subscriptions.
    """
    grace = 3 * MESSAGE_SIZE + 50
    session, transport, _, broker, subscription = topic_subscriber(write_grace=grace)
    session.pause_writing()
    deliver(subscription, 1, 2, 3)
    assert len(transport.data) == 3 * MESSAGE_SIZE
    assert delivered(transport) == ["m1", "m2", "m3"]
    assert broker.named("pause_consumers") == []
    deliver(subscription, 4, 5, 6)
    assert delivered(transport) == []
    assert broker.named("pause_consumers") == [session]


def test_drained_transport_gets_the_backlog_in_order_then_writes_straight() -> None:
    """Once the transport drains, what waited goes first, in order; then writes go straight on."""
    session, transport, _, broker, subscription = topic_subscriber(write_grace=0)
    session.pause_writing()
    deliver(subscription, 1, 2)
    session.receive_data(
        frame("SUBSCRIBE", ("id", "q"), ("destination", "/queue/q"), ("receipt", "r"))
    )
    assert transport.take() == b""
    session.resume_writing()
    assert [f.get("message-id") or f.get("receipt-id") for f in transport.frames()] == [
        "m1",
        "m2",
        "r",
    ]
    assert broker.named("resume_consumers") == [session]
    deliver(subscription, 3)
    assert delivered(transport) == ["m3"]


def test_a_client_that_catches_up_within_the_grace_was_never_behind() -> None:
    """Drained within the grace: nothing waited, and the broker paused nothing."""
    session, transport, _, broker, subscription = topic_subscriber(write_grace=10_000)
    session.pause_writing()
    deliver(subscription, 1)
    session.resume_writing()
    deliver(subscription, 2)
    assert delivered(transport) == ["m1", "m2"]
    assert broker.named("pause_consumers") == broker.named("resume_consumers") == []


def test_disconnect_policy_drops_the_messages_and_closes_with_an_error() -> None:
    """
    Under ``disconnect``, topic messages past slow_consumer_buffer drop everything waiting, and
    the client is closed with an ERROR in a moment (outside the broker's fan-out).
    """
    session, transport, clock, broker, subscription = topic_subscriber(
        write_grace=0, slow_consumer_buffer=2 * MESSAGE_SIZE + 50, slow_consumer_policy="disconnect"
    )
    session.pause_writing()
    deliver(subscription, 1, 2, 3)
    assert broker.named("count_dropped") == [(3, True)]
    deliver(subscription, 4)
    assert broker.named("count_dropped")[-1] == (1, False)
    assert session.state is State.CONNECTED
    clock.advance(0)
    error = error_of(transport)
    assert error.get("message") == "slow consumer"
    assert b"slow-consumer-buffer" in error.body
    assert clock.getDelayedCalls() == []


def test_drop_oldest_policy_keeps_the_newest_messages_within_the_buffer() -> None:
    """Under ``drop-oldest``, the oldest topic messages go so that the buffer holds the newest."""
    session, transport, _, broker, subscription = topic_subscriber(
        write_grace=0,
        slow_consumer_buffer=2 * MESSAGE_SIZE + 50,
        slow_consumer_policy="drop-oldest",
    )
    session.pause_writing()
    deliver(subscription, *range(1, 6))
    assert sum(count for count, _ in broker.named("count_dropped")) > 0
    session.resume_writing()
    kept = delivered(transport)
    assert kept == [f"m{n}" for n in range(6 - len(kept), 6)]
    assert not transport.closed


def test_block_policy_asks_the_broker_to_stop_the_publisher() -> None:
    """Under ``block``, a full buffer makes the broker pause the publisher; nothing is dropped."""
    session, transport, _, broker, subscription = topic_subscriber(
        write_grace=0, slow_consumer_buffer=2 * MESSAGE_SIZE + 50, slow_consumer_policy="block"
    )
    session.pause_writing()
    deliver(subscription, 1, 2, 3)
    assert broker.named("block_sender") == [session]
    assert broker.named("count_dropped") == []
    session.resume_writing()
    assert delivered(transport) == ["m1", "m2", "m3"]


def test_frames_other_than_topic_messages_are_kept_but_stop_reading() -> None:
    """
    Receipts a client does not read are never dropped; past the buffer the session stops
    reading from it, and reads again once the backlog is sent.
    """
    session, transport, _, broker, _ = topic_subscriber(
        write_grace=0, slow_consumer_buffer=100, slow_consumer_policy="drop-oldest"
    )
    session.pause_writing()
    for number in range(10):
        session.receive_data(frame("SEND", ("destination", "/queue/q"), ("receipt", f"r{number}")))
    assert not transport.reading
    assert broker.named("count_dropped") == []
    session.resume_writing()
    assert transport.reading
    assert [f.get("receipt-id") for f in transport.frames()] == [f"r{n}" for n in range(10)]


def test_one_message_larger_than_the_buffer_waits_whole_for_a_reading_client() -> None:
    """
    Issue 14: a topic message larger than slow_consumer_buffer (a 16 MiB body against 8 MiB)
    is kept for a client that is behind, and sent once it drains; the policy acts only when
    another message waits behind it.
    """
    session, transport, clock, broker, subscription = topic_subscriber(
        write_grace=0, slow_consumer_buffer=100, slow_consumer_policy="disconnect"
    )
    session.pause_writing()
    deliver(subscription, 1)
    clock.advance(0)
    assert broker.named("count_dropped") == []
    session.resume_writing()
    assert delivered(transport) == ["m1"]
    session.pause_writing()
    deliver(subscription, 2, 3)
    assert broker.named("count_dropped") == [(2, True)]
    clock.advance(0)
    assert error_of(transport).get("message") == "slow consumer"


def test_drop_oldest_never_drops_the_newest_message_however_large() -> None:
    """Under ``drop-oldest``, a message larger than the buffer is kept; the older ones go."""
    session, transport, _, broker, subscription = topic_subscriber(
        write_grace=0, slow_consumer_buffer=100, slow_consumer_policy="drop-oldest"
    )
    session.pause_writing()
    deliver(subscription, 1, 2, 3)
    assert sum(count for count, _ in broker.named("count_dropped")) == 2
    session.resume_writing()
    assert delivered(transport) == ["m3"]
    assert not transport.closed
