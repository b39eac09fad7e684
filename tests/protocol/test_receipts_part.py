"""
The session's receipts part (stompbroker.protocol.receipts.Receipts) and its write
window (stompbroker.protocol.write_window.WriteWindow), each built alone on a
stand-in for the session (:class:`Owner`), without a session: what they send,
hold, pause and fail is what the stand-in records.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.receipts import BY_ERROR, BY_HELD, Receipts
from stompbroker.protocol.states import Event, State
from stompbroker.protocol.write_window import BY_WINDOW, WriteWindow

DEFAULTS = SessionConfig()


class Owner:
    """A stand-in for the session: the ``ReceiptsOwner`` a :class:`Receipts` answers for."""

    def __init__(self, config: SessionConfig = DEFAULTS) -> None:
        self.config = config
        self.state = State.CONNECTED
        self._handling = False
        self._read_pauses: frozenset[str] = frozenset()
        self.sent: list[Frame] = []
        self.failed: list[ProtocolError] = []
        self.handled: list[list[Frame]] = []

    def send_frame(self, frame: Frame) -> None:
        self.sent.append(frame)

    def _fail(self, error: ProtocolError, event: Event = Event.ERROR) -> None:
        self.failed.append(error)
        self.state = State.CLOSING

    def _handle(self, frames: list[Frame]) -> None:
        self.handled.append(frames)

    def _pause_reading(self, reason: str) -> None:
        self._read_pauses = self._read_pauses | {reason}

    def _resume_reading(self, reason: str) -> None:
        self._read_pauses = self._read_pauses - {reason}

    def receipt_ids(self) -> list[str | None]:
        sent, self.sent = self.sent, []
        return [frame.get("receipt-id") for frame in sent]


def made(config: SessionConfig = DEFAULTS) -> tuple[Receipts, Owner]:
    owner = Owner(config)
    return Receipts(owner, WriteWindow(owner, config)), owner


def with_receipt(command: str, receipt: str | None) -> Frame:
    return Frame(command, (("receipt", receipt),) if receipt is not None else ())


def test_a_receipt_goes_out_at_once_when_nothing_waits() -> None:
    receipts, owner = made()
    receipts.receipt(with_receipt("SEND", "r1"))
    receipts.receipt(with_receipt("SEND", None))
    assert owner.receipt_ids() == ["r1"]


def test_receipts_keep_frame_order_behind_a_store_write() -> None:
    """A receipt ready at once waits behind one whose store write is pending."""
    receipts, owner = made()
    first: Deferred[None] = Deferred()
    receipts.when_stored(first, with_receipt("SEND", "r1"), size=10)
    after: list[str] = []
    receipts.send_receipt("r2", then=lambda: after.append("r2 out"))
    assert owner.receipt_ids() == []
    assert after == []
    assert receipts.window.pending == 1
    assert receipts.window.pending_bytes == 10
    first.callback(None)
    assert owner.receipt_ids() == ["r1", "r2"]
    assert after == ["r2 out"]
    assert receipts.window.pending == 0


def test_a_frame_after_replies_is_held_and_handled_once_they_are_out() -> None:
    receipts, owner = made()
    write: Deferred[None] = Deferred()
    receipts.when_stored(write, with_receipt("SEND", None))
    commit = Frame("COMMIT", (("transaction", "t"),))
    assert receipts.after_replies(commit)
    later = Frame("SEND", (("destination", "/queue/a"),))
    receipts.hold([later])
    write.callback(None)
    assert owner.handled == [[commit, later]]
    assert receipts.held is None


def test_a_failed_write_ends_the_session_after_earlier_receipts() -> None:
    receipts, owner = made()
    first: Deferred[None] = Deferred()
    second: Deferred[None] = Deferred()
    receipts.when_stored(first, with_receipt("SEND", "r1"))
    receipts.when_stored(second, with_receipt("SEND", "r2"))
    second.errback(OSError("disk full"))
    assert owner.failed == []
    assert BY_ERROR in owner._read_pauses
    first.callback(None)
    assert owner.receipt_ids() == ["r1"]
    (error,) = owner.failed
    assert (error.message, error.receipt_id) == ("message not stored", "r2")


def test_an_error_in_order_waits_for_the_receipts_before_it() -> None:
    receipts, owner = made()
    receipts.fail_in_order(ProtocolError("bad", "at once"))
    assert [error.message for error in owner.failed] == ["bad"]
    receipts, owner = made()
    write: Deferred[None] = Deferred()
    receipts.when_stored(write, with_receipt("SEND", "r1"))
    receipts.fail_in_order(ProtocolError("bad", "later"))
    assert owner.failed == []
    write.callback(None)
    assert owner.receipt_ids() == ["r1"]
    assert [error.message for error in owner.failed] == ["bad"]


def test_held_frames_past_the_bound_stop_reading_until_taken() -> None:
    receipts, owner = made(SessionConfig(max_held_bytes=20))
    receipts.start_holding()
    receipts.hold([Frame("SEND", (("destination", "/queue/a"),), b"x" * 30)])
    assert BY_HELD in owner._read_pauses
    assert len(receipts.take_held()) == 1
    assert owner._read_pauses == frozenset()
    assert receipts.held is None


def test_drop_held_forgets_what_was_held() -> None:
    receipts, _ = made()
    receipts.start_holding((Frame("BEGIN"),))
    receipts.drop_held()
    assert receipts.held is None


def test_the_window_pauses_at_either_bound_and_resumes_below_both() -> None:
    owner = Owner()
    window = WriteWindow(owner, SessionConfig(max_pending_writes=2, max_pending_write_bytes=100))
    window.started(10)
    assert owner._read_pauses == frozenset()
    window.started(10)
    assert owner._read_pauses == {BY_WINDOW}
    window.ended(10)
    assert owner._read_pauses == frozenset()
    window.started(200)
    assert owner._read_pauses == {BY_WINDOW}
    window.ended(200)
    assert owner._read_pauses == frozenset()
    assert (window.pending, window.pending_bytes) == (1, 10)
