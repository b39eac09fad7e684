"""
The stream hook of resumable sessions: a stream subscription remembers the
offset of the last message it delivered, and a resumed session subscribes
again from the next one (stompbroker.protocol.subscriptions.StreamSubscription,
stompbroker.protocol.resume.resume_book.resubscribe_headers), against the recording broker.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from stompbroker.protocol.message import Message
from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.protocol.session import SessionConfig
from tests.support.session import RecordingBroker, frame, make_session, subscribe

CONFIG = SessionConfig(heartbeat=(0, 0), resumption=ResumeBook(Clock()))


def connect(broker: RecordingBroker, token: str = "") -> tuple[Any, Any, Any]:
    """:returns: a resumable session past CONNECT, its transport, and its CONNECTED."""
    session, transport, _, _ = make_session(broker, CONFIG)
    session.receive_data(frame("CONNECT", ("accept-version", "1.2"), ("resume-token", token)))
    [connected] = transport.frames()
    return session, transport, connected


def test_a_resumed_stream_subscription_starts_after_the_last_offset_delivered() -> None:
    """Given offsets 4 and 5 before the drop, the resumed session subscribes at offset=6."""
    broker = RecordingBroker()
    session, transport, connected = connect(broker)
    stream = subscribe(
        session,
        transport,
        ("id", "s"),
        ("destination", "/stream/log"),
        ("ack", "client"),
        ("x-stream-offset", "first"),
    )
    for offset in (4, 5):
        stream.deliver(
            Message("/stream/log", f"m{offset}", (("x-stream-offset", str(offset)),), b"")
        )
    session.connection_lost()
    assert ("unsubscribe", stream) in broker.calls
    _, _, answer = connect(broker, connected.get("resume-token") or "")
    assert answer.get("resumed") == "true"
    resumed = broker.subscribers[-1]
    assert resumed.subscription_id == "s" and resumed.ack_mode == "client"
    assert resumed.headers["x-stream-offset"] == "offset=6"


def test_a_stream_subscription_that_delivered_nothing_subscribes_again_as_it_first_did() -> None:
    """Neither delivered nor told its start (as a timestamp start is not), the original stands."""
    broker = RecordingBroker()
    session, transport, connected = connect(broker)
    subscribe(
        session,
        transport,
        ("id", "s"),
        ("destination", "/stream/log"),
        ("x-stream-offset", "first"),
    )
    session.connection_lost()
    connect(broker, connected.get("resume-token") or "")
    assert broker.subscribers[-1].headers["x-stream-offset"] == "first"


def test_a_stream_subscription_told_its_start_subscribes_again_from_there() -> None:
    """Told by its reader that it starts at offset 7 (a next start), it resumes at offset=7."""
    broker = RecordingBroker()
    session, transport, connected = connect(broker)
    stream = subscribe(
        session, transport, ("id", "s"), ("destination", "/stream/log"), ("x-stream-offset", "next")
    )
    stream.stream_position(7)
    session.connection_lost()
    connect(broker, connected.get("resume-token") or "")
    assert broker.subscribers[-1].headers["x-stream-offset"] == "offset=7"
