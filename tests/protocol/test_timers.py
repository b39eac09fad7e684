"""
A session's clocks (stompbroker.protocol.timers): heart-beats both ways, the
connect timeout and the frame timeout, on a ``task.Clock``, against the
recording fake broker.
"""

from __future__ import annotations

from stompbroker.protocol.session import SessionConfig, State
from tests.support.session import connected, error_of, frame, make_session

# -- heart-beats ---------------------------------------------------------------------------


def test_server_sends_heartbeat_when_silent() -> None:
    """
    STOMP 1.2, "Heart-beating": the server sends an EOL when it has sent nothing for the
    interval.
    """
    session, transport, clock, _ = connected(
        heart_beat="0,1000", config=SessionConfig(heartbeat=(1000, 0))
    )
    assert session.heartbeat == (1000, 0)
    clock.advance(0.5)
    clock.advance(0.5)
    assert transport.take() == b"\n"
    clock.advance(1.0)
    assert transport.take() == b"\n"


def test_server_skips_heartbeat_after_other_output() -> None:
    """Any frame sent counts as a heart-beat, so no EOL follows it within the interval."""
    session, transport, clock, _ = connected(
        heart_beat="0,1000", config=SessionConfig(heartbeat=(1000, 0))
    )
    session.receive_data(
        frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"), ("receipt", "r"))
    )
    clock.advance(0.5)
    assert [f.command for f in transport.frames()] == ["RECEIPT"]
    clock.advance(0.5)
    assert transport.take() == b"\n"


def test_silent_client_is_closed_after_grace() -> None:
    """
    A client that promised heart-beats and went silent past the grace period gets an ERROR and a
    close.
    """
    session, transport, clock, broker = connected(
        heart_beat="1000,0", config=SessionConfig(heartbeat=(0, 1000), heartbeat_grace=2.0)
    )
    assert session.heartbeat == (0, 1000)
    clock.advance(1.9)
    assert not transport.closed
    clock.advance(0.2)
    assert error_of(transport).get("message") == "heart-beat timeout"
    assert session not in broker.connections
    assert clock.getDelayedCalls() == []


def test_heartbeats_run_at_the_clients_one_second_pace_by_default() -> None:
    """
    Issue 14: a client asking for beats every second (stompjs in a browser) gets one every
    second from the default settings, though --heartbeat offers 10 s, and is dropped after
    about two of its own seconds of silence.
    """
    session, transport, clock, _ = connected(heart_beat="1000,1000", config=SessionConfig())
    assert session.heartbeat == (1000, 1000)
    clock.advance(0.5)
    clock.advance(0.5)
    assert transport.take() == b"\n"
    session.receive_data(b"\n")
    for _ in range(3):
        clock.advance(0.5)
    beats = transport.take()
    assert beats and not beats.strip(b"\n")
    clock.advance(0.4)
    assert not transport.closed
    clock.advance(0.2)
    assert error_of(transport).get("message") == "heart-beat timeout"


def test_client_heartbeats_keep_connection_alive() -> None:
    """EOLs from the client count as life."""
    session, transport, clock, _ = connected(
        heart_beat="1000,0", config=SessionConfig(heartbeat=(0, 1000))
    )
    for _ in range(10):
        clock.advance(1.0)
        session.receive_data(b"\n")
    assert not transport.closed
    assert transport.take() == b""


def test_stomp_1_0_has_no_heartbeats() -> None:
    """STOMP 1.0 predates heart-beating: nothing is scheduled."""
    session, transport, clock, _ = connected(version="1.0", heart_beat="1000,1000")
    assert session.heartbeat == (0, 0)
    assert clock.getDelayedCalls() == []


def test_disconnect_cancels_heartbeat_timers() -> None:
    """After DISCONNECT no timer of the session stays scheduled."""
    session, transport, clock, _ = connected(heart_beat="1000,1000")
    assert clock.getDelayedCalls()
    session.receive_data(frame("DISCONNECT"))
    assert clock.getDelayedCalls() == []


def test_a_pong_counts_as_hearing_from_the_client() -> None:
    """keep_alive (a WebSocket pong, say) resets the silence as data does."""
    session, transport, clock, _ = connected(
        heart_beat="1000,0", config=SessionConfig(heartbeat=(0, 1000), heartbeat_grace=2.0)
    )
    for _ in range(5):
        clock.advance(1.5)
        session.keep_alive()
    assert not transport.closed


def test_silence_while_the_session_does_not_read_is_not_the_clients() -> None:
    """
    While reading is paused (the broker asked), the heart-beat check waits; once reading
    resumes, the client has a whole grace again.
    """
    session, transport, clock, _ = connected(
        heart_beat="1000,0", config=SessionConfig(heartbeat=(0, 1000), heartbeat_grace=2.0)
    )
    session.pause_reading()
    clock.advance(10)
    assert not transport.closed
    session.resume_reading()
    clock.advance(1.9)
    assert not transport.closed
    clock.advance(2.1)
    assert error_of(transport).get("message") == "heart-beat timeout"


def test_no_heartbeat_is_written_while_the_client_is_behind() -> None:
    """A heart-beat would only wait in the backlog behind frames: none is written there."""
    session, transport, clock, _ = connected(
        heart_beat="0,1000", config=SessionConfig(heartbeat=(1000, 0), write_grace=0)
    )
    session.pause_writing()
    clock.advance(3)
    session.resume_writing()
    assert transport.take() == b""
    clock.advance(1)
    assert transport.take() == b"\n"


# -- timeouts ------------------------------------------------------------------------------


def test_a_socket_that_sends_no_connect_is_closed_after_the_connect_timeout() -> None:
    """A connection must complete its CONNECT within connect_timeout: else an ERROR naming it."""
    session, transport, clock, broker = make_session(config=SessionConfig(connect_timeout=5))
    clock.advance(4.9)
    assert not transport.closed
    clock.advance(0.1)
    error = error_of(transport)
    assert error.get("message") == "connect timeout"
    assert b"connect-timeout" in error.body
    assert session not in broker.connections
    assert clock.getDelayedCalls() == []


def test_connect_ends_the_connect_timeout() -> None:
    """Once CONNECTED, the connect timeout no longer applies."""
    session, transport, clock, _ = connected(config=SessionConfig(connect_timeout=5))
    clock.advance(60)
    assert not transport.closed
    assert session.state is State.CONNECTED


def test_a_frame_begun_must_end_within_the_frame_timeout() -> None:
    """A frame whose first byte came must be complete within frame_timeout, else an ERROR."""
    session, transport, clock, _ = connected(config=SessionConfig(frame_timeout=3))
    session.receive_data(b"SEND\ndestination:/queue/a\n")
    clock.advance(2)
    session.receive_data(b"x:1\n")
    clock.advance(0.9)
    assert not transport.closed
    clock.advance(0.1)
    error = error_of(transport)
    assert error.get("message") == "frame timeout"
    assert b"frame-timeout" in error.body


def test_frames_completed_in_time_never_time_out() -> None:
    """A frame completed within the timeout stops its clock; the next one starts its own."""
    session, transport, clock, broker = connected(config=SessionConfig(frame_timeout=3))
    sent = frame("SEND", ("destination", "/queue/a"), body=b"x")
    for _ in range(3):
        session.receive_data(sent[:10])
        clock.advance(2)
        session.receive_data(sent[10:])
        clock.advance(2)
    assert not transport.closed
    assert len(broker.named("send")) == 3


def test_a_frame_cannot_time_out_while_the_session_does_not_read() -> None:
    """While reading is paused the client cannot finish its frame: its clock starts again after."""
    session, transport, clock, _ = connected(config=SessionConfig(frame_timeout=3))
    session.receive_data(b"SEND\n")
    session.pause_reading()
    clock.advance(10)
    assert not transport.closed
    session.resume_reading()
    clock.advance(2.9)
    assert not transport.closed
    clock.advance(3.1)
    assert error_of(transport).get("message") == "frame timeout"
