"""
A subscription told of a gap (SessionSubscription.mark_gap) says
``cluster-gap:true`` on its next MESSAGE and on no later one, whichever way its
frames are written (straight, diverted, held for a resume), with no sockets.
"""

from __future__ import annotations

from stompbroker.protocol.message import Message
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.subscribers import SessionSubscription, TrackedSubscription
from tests.support.broker import FakeConnection


class Output:
    """Where the subscription writes (``MessageOutput``): it records every frame written."""

    def __init__(self, version: str = "1.2") -> None:
        self.version = version
        self.written: list[bytes] = []

    def count_messages(self, count: int, size: int) -> None:
        raise AssertionError("no delivery is counted in batches here")

    def write_message(self, data: bytes) -> None:
        self.written.append(data)

    def write_delivery(self, data: bytes) -> None:
        self.written.append(data)

    def headers(self) -> list[dict[str, str]]:
        """:returns: the headers of each frame written, parsed."""
        parser = FrameParser()
        parser.version = self.version
        frames = [frame for data in self.written for frame in parser.receive_data(data)]
        assert all(frame.command == "MESSAGE" for frame in frames)
        return [dict(frame.headers) for frame in frames]


def message(n: int, destination: str = "/topic/t") -> Message:
    return Message(destination, f"m-{n}", (("n", str(n)),), b"body %d" % n)


def topic_subscription(output: Output, named: bool = True) -> SessionSubscription:
    return SessionSubscription(
        FakeConnection("s1"), output, output.version, "sub-1", "/topic/t", "auto", {}, named=named
    )


def test_the_next_message_after_a_gap_says_so_and_the_one_after_does_not() -> None:
    output = Output()
    subscription = topic_subscription(output)
    subscription.deliver(message(1))
    assert subscription.mark_gap() == 1
    subscription.deliver(message(2))
    subscription.deliver(message(3))
    headers = output.headers()
    assert [h.get("cluster-gap") for h in headers] == [None, "true", None]
    # The rest of the frame is what it would have been.
    assert headers[1]["subscription"] == "sub-1"
    assert headers[1]["message-id"] == "m-2"
    assert headers[1]["n"] == "2"
    assert output.written[1].endswith(b"\n\nbody 2\x00\n")


def test_a_second_mark_before_a_message_tells_nothing_more() -> None:
    output = Output()
    subscription = topic_subscription(output)
    assert subscription.mark_gap() == 1
    assert subscription.mark_gap() == 0
    subscription.deliver(message(1))
    subscription.deliver(message(2))
    assert [h.get("cluster-gap") for h in output.headers()] == ["true", None]
    # Once delivered, a new gap is told again.
    assert subscription.mark_gap() == 1


def test_a_tracked_subscription_keeps_its_ack_header_after_the_gap_header() -> None:
    output = Output()
    subscription = TrackedSubscription(
        FakeConnection("s1"), output, "1.2", "sub-1", "/topic/t", "client", {}, number=7
    )
    subscription.mark_gap()
    subscription.deliver(message(1))
    subscription.deliver(message(2))
    headers = output.headers()
    assert headers[0]["cluster-gap"] == "true"
    assert headers[0]["ack"] == "7.m-1"
    assert headers[1]["ack"] == "7.m-2"
    assert "cluster-gap" not in headers[1]


def test_a_stomp_10_subscription_without_an_id_gets_it_too() -> None:
    output = Output("1.0")
    subscription = topic_subscription(output, named=False)
    subscription.mark_gap()
    subscription.deliver(message(1))
    headers = output.headers()
    assert headers[0]["cluster-gap"] == "true"
    assert "subscription" not in headers[0]


def test_a_gap_pending_when_writes_are_diverted_goes_to_the_new_write() -> None:
    output = Output()
    subscription = topic_subscription(output)
    subscription.mark_gap()
    diverted: list[bytes] = []
    subscription.divert(diverted.append)
    subscription.deliver(message(1))
    subscription.deliver(message(2))
    assert output.written == []
    assert [b"cluster-gap:true" in frame for frame in diverted] == [True, False]


def test_held_writes_carry_the_gap_header_once_whenever_the_mark_came() -> None:
    output = Output()
    subscription = topic_subscription(output)
    # Marked before the hold, told on the first frame held.
    subscription.mark_gap()
    release = subscription.hold_writes()
    subscription.deliver(message(1))
    subscription.deliver(message(2))
    assert output.written == []
    release()
    subscription.deliver(message(3))
    # Marked during a hold with nothing held: told on the first frame after.
    release = subscription.hold_writes()
    subscription.mark_gap()
    release()
    subscription.deliver(message(4))
    subscription.deliver(message(5))
    assert [h.get("cluster-gap") for h in output.headers()] == ["true", None, None, "true", None]
