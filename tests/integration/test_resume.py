"""
Resumable sessions against a real ``twistd`` broker, with ``stomp.py``: the
subscriber's TCP connection is cut with its socket (no DISCONNECT), another
client publishes meanwhile, and the subscriber comes back with its token.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import publish
from tests.support.process import BrokerProcess, module_broker
from tests.support.resume import cut, resumable, subscribed

resume_broker = module_broker("resume_broker", "--resume-buffer", "20000")


def numbered(prefix: str, numbers: range) -> list[str]:
    return [f"{prefix}{number}" for number in numbers]


def test_a_cut_subscriber_resumes_with_every_message_once_and_in_order(
    resume_broker: BrokerProcess,
) -> None:
    """Messages published while it was away come first, in order, then the live ones, none twice."""
    first, inbox = subscribed(resume_broker, "/topic/resume", "news")
    token = inbox.connected["resume-token"]
    assert inbox.connected["resumed"] == "false"
    publish(resume_broker.address, "/topic/resume", numbered("m", range(0, 5)))
    assert inbox.wait_for(lambda: len(inbox.messages) == 5)
    cut(first)
    publish(resume_broker.address, "/topic/resume", numbered("m", range(5, 105)))

    again, back = resumable(resume_broker, token)
    try:
        assert back.connected["resumed"] == "true"
        assert "resume-gap" not in back.connected
        publish(resume_broker.address, "/topic/resume", numbered("m", range(105, 110)))
        assert back.wait_for(lambda: len(back.messages) >= 105)
        time.sleep(0.2)
        got = [body.decode() for body in inbox.bodies() + back.bodies()]
        assert got == numbered("m", range(0, 110))
        assert {message.headers["subscription"] for message in back.messages} == {"news"}
        assert token not in resume_broker.log()
    finally:
        again.disconnect()


def test_unacknowledged_queue_messages_are_redelivered_on_resume(
    resume_broker: BrokerProcess,
) -> None:
    """What the cut client had not acknowledged comes back to it, marked redelivered."""
    first, inbox = subscribed(resume_broker, "/queue/resume-jobs", "jobs", ack="client-individual")
    publish(resume_broker.address, "/queue/resume-jobs", ["j1", "j2"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 2)
    cut(first)
    again, back = resumable(resume_broker, inbox.connected["resume-token"])
    try:
        assert back.wait_for(lambda: len(back.messages) == 2)
        assert back.bodies() == [b"j1", b"j2"]
        assert all(m.headers["redelivered"] == "true" for m in back.messages)
        for message in back.messages:
            again.ack(message.headers["ack"], receipt=f"ack-{message.body.decode()}")
        assert back.wait_for(lambda: len(back.receipts) == 2)
    finally:
        again.disconnect()


def test_a_wrong_token_gets_a_fresh_session(resume_broker: BrokerProcess) -> None:
    """An unknown token is answered resumed:false, with a new token to keep."""
    connection, session = resumable(resume_broker, "no-such-token")
    try:
        assert session.connected["resumed"] == "false"
        assert session.connected["resume-token"] not in ("", "no-such-token")
    finally:
        connection.disconnect()


def test_an_overflowing_buffer_resumes_with_a_gap(resume_broker: BrokerProcess) -> None:
    """Past --resume-buffer the resumed CONNECTED says resume-gap:true; the newest are kept."""
    first, inbox = subscribed(resume_broker, "/topic/resume-flood", "flood")
    cut(first)
    publish(resume_broker.address, "/topic/resume-flood", numbered("f", range(400)))
    again, back = resumable(resume_broker, inbox.connected["resume-token"])
    try:
        assert back.connected["resumed"] == "true"
        assert back.connected["resume-gap"] == "true"
        assert back.wait_for(lambda: back.bodies()[-1:] == [b"f399"])
        assert 0 < len(back.messages) < 400
    finally:
        again.disconnect()


def test_past_the_window_the_client_starts_afresh(tmp_path: Path) -> None:
    """A client back after --resume-window gets resumed:false and none of the old flow."""
    with BrokerProcess(tmp_path, "--resume-window", "0.5", http=None) as broker:
        first, inbox = subscribed(broker, "/topic/late", "late")
        cut(first)
        time.sleep(1.0)
        publish(broker.address, "/topic/late", ["gone"])
        again, back = resumable(broker, inbox.connected["resume-token"])
        try:
            assert back.connected["resumed"] == "false"
            publish(broker.address, "/topic/late", ["still gone"])
            time.sleep(0.2)
            assert back.messages == []
        finally:
            again.disconnect()


def test_messages_lost_in_flight_are_sent_again_after_the_clients_last(
    resume_broker: BrokerProcess,
) -> None:
    """A client that says which message it got last gets everything after it, in flight or not."""
    first, inbox = subscribed(resume_broker, "/topic/resume-flight", "flight")
    publish(resume_broker.address, "/topic/resume-flight", numbered("f", range(0, 6)))
    assert inbox.wait_for(lambda: len(inbox.messages) == 6)
    cut(first)
    publish(resume_broker.address, "/topic/resume-flight", numbered("f", range(6, 10)))
    # As if f3, f4 and f5 had been in the socket when the network died.
    last = inbox.messages[2].headers["message-id"]
    again, back = resumable(
        resume_broker,
        inbox.connected["resume-token"],
        resume_last_subscription="flight",
        resume_last_message_id=last,
    )
    try:
        assert back.connected["resumed"] == "true"
        assert back.wait_for(lambda: len(back.messages) == 7)
        time.sleep(0.2)
        assert [body.decode() for body in back.bodies()] == numbered("f", range(3, 10))
    finally:
        again.disconnect()


def stream_offsets(messages: list[Any]) -> list[int]:
    return [int(message.headers["x-stream-offset"]) for message in messages]


def ack_all(connection: Any, inbox: Any, receipt: str) -> None:
    """Acknowledge every message ``inbox`` has, and wait until the broker has the last ACK."""
    for message in inbox.messages[:-1]:
        connection.ack(message.headers["ack"])
    connection.ack(inbox.messages[-1].headers["ack"], receipt=receipt)
    assert inbox.wait_for(lambda: receipt in inbox.receipts)


#: What a stream subscription of each start replays of the two messages sent before it.
REPLAYED = {"first": ["old0", "old1"], "last": ["old1"], "next": []}


@pytest.mark.parametrize(
    ("start", "ack", "before"),
    [
        ("first", "auto", 3),
        ("next", "auto", 3),
        ("last", "auto", 3),
        ("first", "client-individual", 3),
        ("next", "client-individual", 3),
        # Cut before it delivered anything: it goes on from where it started.
        ("next", "auto", 0),
        ("next", "client-individual", 0),
    ],
)
def test_a_cut_stream_subscriber_resumes_from_its_last_offset(
    resume_broker: BrokerProcess, request: pytest.FixtureRequest, start: str, ack: str, before: int
) -> None:
    """A resumed /stream/ subscription gets every message once, in order, with its id."""
    destination = "/stream/resume." + request.node.callspec.id
    publish(resume_broker.address, destination, numbered("old", range(2)))
    first, inbox = subscribed(
        resume_broker, destination, "log", ack=ack, **{"x-stream-offset": start}
    )
    publish(resume_broker.address, destination, numbered("m", range(0, before)))
    expected = REPLAYED[start] + numbered("m", range(30))
    held = len(REPLAYED[start]) + before
    assert inbox.wait_for(lambda: len(inbox.messages) == held)
    if ack != "auto" and held:
        ack_all(first, inbox, "acked")
    cut(first)
    publish(resume_broker.address, destination, numbered("m", range(before, 25)))

    again, back = resumable(resume_broker, inbox.connected["resume-token"])
    try:
        assert back.connected["resumed"] == "true"
        publish(resume_broker.address, destination, numbered("m", range(25, 30)))
        assert back.wait_for(lambda: held + len(back.messages) >= len(expected))
        time.sleep(0.2)
        assert [body.decode() for body in inbox.bodies() + back.bodies()] == expected
        got = stream_offsets(inbox.messages + back.messages)
        assert got == list(range(got[0], got[0] + len(expected)))
        assert {message.headers["subscription"] for message in back.messages} == {"log"}
        if ack != "auto":
            ack_all(again, back, "acked-again")
    finally:
        again.disconnect()
