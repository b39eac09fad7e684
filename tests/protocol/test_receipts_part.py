"""
The session's receipts part (stompbroker.protocol.receipts.Receipts) and its write
window (stompbroker.protocol.write_window.WriteWindow), each built alone on
what the session would give them (a real ``SessionState`` and ``ReadPauses``,
and callables that record), without a session or a stand-in for one: what they
send, hold, pause, fail and hand back is what those record.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.receipts import BY_ERROR, BY_HELD, Receipts
from stompbroker.protocol.write_window import BY_WINDOW, WriteWindow
from tests.support.parts import Failures, reading

DEFAULTS = SessionConfig()


class Made:
    """A :class:`Receipts` and what it was given; what it sends, fails and hands back, recorded."""

    def __init__(self, config: SessionConfig = DEFAULTS) -> None:
        self.failures = Failures()
        self.reading, self.transport = reading()
        self.sent: list[Frame] = []
        self.handled: list[list[Frame]] = []
        self.receipts = Receipts(
            self.sent.append,
            self.failures,
            self.failures.life,
            self.reading,
            WriteWindow(self.reading, config),
            config,
            self.handled.append,
        )

    @property
    def failed(self) -> list[ProtocolError]:
        return self.failures.errors

    def paused(self) -> frozenset[str]:
        return self.reading.reasons

    def receipt_ids(self) -> list[str | None]:
        sent, self.sent[:] = list(self.sent), []
        return [frame.get("receipt-id") for frame in sent]


def made(config: SessionConfig = DEFAULTS) -> tuple[Receipts, Made]:
    parts = Made(config)
    return parts.receipts, parts


def with_receipt(command: str, receipt: str | None) -> Frame:
    return Frame(command, (("receipt", receipt),) if receipt is not None else ())


def test_a_receipt_goes_out_at_once_when_nothing_waits() -> None:
    receipts, parts = made()
    receipts.receipt(with_receipt("SEND", "r1"))
    receipts.receipt(with_receipt("SEND", None))
    assert parts.receipt_ids() == ["r1"]


def test_receipts_keep_frame_order_behind_a_store_write() -> None:
    """A receipt ready at once waits behind one whose store write is pending."""
    receipts, parts = made()
    first: Deferred[None] = Deferred()
    receipts.when_stored(first, with_receipt("SEND", "r1"), size=10)
    after: list[str] = []
    receipts.send_receipt("r2", then=lambda: after.append("r2 out"))
    assert parts.receipt_ids() == []
    assert after == []
    assert receipts.window.pending == 1
    assert receipts.window.pending_bytes == 10
    first.callback(None)
    assert parts.receipt_ids() == ["r1", "r2"]
    assert after == ["r2 out"]
    assert receipts.window.pending == 0


def test_a_frame_after_replies_is_held_and_handled_once_they_are_out() -> None:
    receipts, parts = made()
    write: Deferred[None] = Deferred()
    receipts.when_stored(write, with_receipt("SEND", None))
    commit = Frame("COMMIT", (("transaction", "t"),))
    assert receipts.after_replies(commit)
    later = Frame("SEND", (("destination", "/queue/a"),))
    receipts.hold([later])
    write.callback(None)
    assert parts.handled == [[commit, later]]
    assert receipts.held is None


def test_a_failed_write_ends_the_session_after_earlier_receipts() -> None:
    receipts, parts = made()
    first: Deferred[None] = Deferred()
    second: Deferred[None] = Deferred()
    receipts.when_stored(first, with_receipt("SEND", "r1"))
    receipts.when_stored(second, with_receipt("SEND", "r2"))
    second.errback(OSError("disk full"))
    assert parts.failed == []
    assert BY_ERROR in parts.paused()
    first.callback(None)
    assert parts.receipt_ids() == ["r1"]
    (error,) = parts.failed
    assert (error.message, error.receipt_id) == ("message not stored", "r2")


def test_an_error_in_order_waits_for_the_receipts_before_it() -> None:
    receipts, parts = made()
    receipts.fail_in_order(ProtocolError("bad", "at once"))
    assert [error.message for error in parts.failed] == ["bad"]
    receipts, parts = made()
    write: Deferred[None] = Deferred()
    receipts.when_stored(write, with_receipt("SEND", "r1"))
    receipts.fail_in_order(ProtocolError("bad", "later"))
    assert parts.failed == []
    write.callback(None)
    assert parts.receipt_ids() == ["r1"]
    assert [error.message for error in parts.failed] == ["bad"]


def test_held_frames_past_the_bound_stop_reading_until_taken() -> None:
    receipts, parts = made(SessionConfig(max_held_bytes=20))
    receipts.start_holding()
    receipts.hold([Frame("SEND", (("destination", "/queue/a"),), b"x" * 30)])
    assert BY_HELD in parts.paused()
    assert len(receipts.take_held()) == 1
    assert parts.paused() == frozenset()
    assert receipts.held is None


def test_drop_held_forgets_what_was_held() -> None:
    receipts, _ = made()
    receipts.start_holding((Frame("BEGIN"),))
    receipts.drop_held()
    assert receipts.held is None


def test_the_window_pauses_at_either_bound_and_resumes_below_both() -> None:
    pauses, transport = reading()
    window = WriteWindow(pauses, SessionConfig(max_pending_writes=2, max_pending_write_bytes=100))
    window.started(10)
    assert pauses.reasons == frozenset()
    window.started(10)
    assert (pauses.reasons, transport.reading) == ({BY_WINDOW}, False)
    window.ended(10)
    assert (pauses.reasons, transport.reading) == (frozenset(), True)
    window.started(200)
    assert pauses.reasons == {BY_WINDOW}
    window.ended(200)
    assert pauses.reasons == frozenset()
    assert (window.pending, window.pending_bytes) == (1, 10)
