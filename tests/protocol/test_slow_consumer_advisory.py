"""
The slow-consumer advisory (stompbroker.protocol.advisory, sent by
stompbroker.protocol.slow_consumer): a client falling behind is warned on its
subscription, once per episode, before its policy applies, and operators see
the same on the advisory topic.
"""

from __future__ import annotations

from typing import Any

from stompbroker.protocol.advisory import ADVISORY_HEADER, SLOW_CONSUMER_TOPIC
from tests.support.slow_consumers import MESSAGE_SIZE, deliver, topic_subscriber


def advisories(frames: list[Any]) -> list[Any]:
    return [f for f in frames if f.command == "MESSAGE" and f.get(ADVISORY_HEADER)]


def behind(policy: str = "disconnect", buffer: int = 4 * MESSAGE_SIZE) -> Any:
    """:returns: a subscriber that fell behind, its transport, clock, broker and subscription."""
    session, transport, clock, broker, subscription = topic_subscriber(
        write_grace=0, slow_consumer_buffer=buffer, slow_consumer_policy=policy
    )
    session.pause_writing()
    return session, transport, clock, broker, subscription


def test_the_client_is_warned_once_half_its_buffer_waits_ahead_of_the_messages() -> None:
    """Past half the buffer the client gets one advisory on its subscription, first in line."""
    session, transport, _, _, subscription = behind(policy="drop-oldest")
    deliver(subscription, 1, 2)
    session.resume_writing()
    assert advisories(transport.frames()) == []
    session.pause_writing()
    deliver(subscription, 3, 4, 5, 6)
    session.resume_writing()
    frames = transport.frames()
    [advisory] = advisories(frames)
    assert frames[0] is advisory
    assert advisory.get("subscription") == "t" and advisory.get("destination") == "/topic/t"
    assert advisory.get(ADVISORY_HEADER) == "slow-consumer"
    assert advisory.get("stompbroker-bytes-waiting") == str(3 * MESSAGE_SIZE)
    assert advisory.get("stompbroker-policy") == "drop-oldest"
    assert advisory.get("stompbroker-buffer") == str(4 * MESSAGE_SIZE)
    assert [f.get("message-id") for f in frames[1:]] == ["m3", "m4", "m5", "m6"]


def test_one_advisory_per_episode_and_a_new_one_for_the_next() -> None:
    """More messages in the same episode do not warn again; once caught up, the next one does."""
    session, transport, _, _, subscription = behind(policy="drop-oldest")
    deliver(subscription, *range(1, 10))
    session.resume_writing()
    assert len(advisories(transport.frames())) == 1
    session.pause_writing()
    deliver(subscription, *range(10, 20))
    session.resume_writing()
    assert len(advisories(transport.frames())) == 1


def test_operators_see_the_advisory_on_the_advisory_topic() -> None:
    """The same headers, with the session, address and subscription, go to the advisory topic."""
    session, _, clock, broker, subscription = behind(policy="block")
    deliver(subscription, 1, 2, 3)
    assert broker.named("send") == []
    clock.advance(0)
    [published] = broker.named("send")
    headers = dict(published.headers)
    assert published.destination == SLOW_CONSUMER_TOPIC
    assert headers[ADVISORY_HEADER] == "slow-consumer"
    assert headers["stompbroker-policy"] == "block"
    assert headers["session"] == session.session_id
    assert headers["subscription"] == "t"
    assert headers["subscription-destination"] == "/topic/t"


def test_a_disconnected_client_reads_the_advisory_before_its_error() -> None:
    """Even when the policy acts at once, the warning reaches the client ahead of the ERROR."""
    _, transport, clock, _, subscription = behind(policy="disconnect", buffer=MESSAGE_SIZE)
    deliver(subscription, 1, 2)
    clock.advance(0)
    frames = transport.frames()
    assert frames[0].get(ADVISORY_HEADER) == "slow-consumer"
    assert frames[0].get("stompbroker-policy") == "disconnect"
    assert frames[-1].command == "ERROR" and frames[-1].get("message") == "slow consumer"
