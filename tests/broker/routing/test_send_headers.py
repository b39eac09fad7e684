"""
Tests of :class:`SendHeaders` on its own, without a router: what the SEND headers
the broker acts on make of a message, and what an engine without scheduling or
retained messages refuses.
"""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.engine.capabilities import LOCAL, Capabilities
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.routing.destinations import Kind
from stompbroker.broker.routing.send_headers import ACTED_ON, ACTED_ON_WHEN_PERSISTENT, SendHeaders
from stompbroker.protocol.errors import NotSupported
from stompbroker.protocol.message import Message

EPOCH = 1_700_000_000.0


#: An engine that can neither schedule nor retain (nor group a shared queue's messages).
WITHOUT = Capabilities(scheduling=False, retain=False, message_groups=False)


def reader(
    persistent_queues: bool = False, capabilities: Capabilities = LOCAL, ttl: int = 0
) -> SendHeaders:
    """:returns: a reading of SEND headers at :data:`EPOCH`, without scheduling or retaining."""
    clock = Clock()
    clock.advance(EPOCH)
    acted_on = ACTED_ON_WHEN_PERSISTENT if persistent_queues else ACTED_ON
    # No temporary reply-to is read here, so the registry is never asked.
    return SendHeaders(
        clock, None, DeliveryPolicy(ttl=ttl), acted_on, persistent_queues, capabilities, None, None
    )


def test_prepare_reads_what_the_broker_acts_on_the_first_of_a_repeated_header_winning() -> None:
    headers = (
        ("expires", str(int(EPOCH * 1000) + 5000)),
        ("priority", "7"),
        ("priority", "2"),
        ("persistent", "true"),
        ("JMSXGroupID", "g"),
        ("JMSXGroupSeq", "-1"),
        ("x", "y"),
    )
    prepared, expires, persistent, priority, group, timing = reader(True).prepare(
        headers, None, Kind.QUEUE
    )
    assert prepared == headers
    assert (expires, persistent, priority, group, timing) == (EPOCH + 5, True, 7, ("g", True), None)


def test_prepare_keeps_persistent_topics_only_when_asked_and_hands_on_the_timing_headers() -> None:
    headers = (("persistent", "false"), ("retain", "set"))
    _, _, persistent, _, _, timing = reader(True).prepare(headers, None, Kind.TOPIC)
    assert not persistent
    assert timing == {"persistent": "false", "retain": "set"}


def test_a_grouped_message_to_a_queue_shared_between_nodes_is_refused() -> None:
    with pytest.raises(NotSupported, match="message groups"):
        reader(capabilities=WITHOUT).prepare((("JMSXGroupID", "g"),), None, Kind.QUEUE)


@pytest.mark.parametrize(
    ("timing", "refusal"),
    [({"retain": "set"}, "retain"), ({"AMQ_SCHEDULED_DELAY": "1000"}, "scheduled delivery")],
)
def test_an_engine_without_retained_or_scheduled_messages_refuses_their_headers(
    timing: dict[str, str], refusal: str
) -> None:
    message = Message("/topic/t", "m-1", tuple(timing.items()), b"", 0.0, 0, False, 4)
    with pytest.raises(NotSupported, match=refusal):
        reader(capabilities=WITHOUT).timed(lambda message: None, message, Kind.TOPIC, timing, None)
