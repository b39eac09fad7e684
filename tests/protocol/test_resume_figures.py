"""
What the resume book tells operators and lets them do
(stompbroker.protocol.resume.resume_book): counts of connected and detached sessions,
the bytes their buffers hold, what became of tokens and windows, the listing,
an operator's end, and shedding for memory, on a ``task.Clock``.
"""

from __future__ import annotations

from twisted.internet.task import Clock

from stompbroker.protocol.resume.resume_book import Detached, ResumeBook


class Session:
    """Stands in for a connected session, which the book never needs to take over here."""

    def take_over(self) -> None:
        raise AssertionError("not taken over in these tests")


def detach(
    book: ResumeBook, token: str, session: str, frames: int = 0, released: list[str] | None = None
) -> Detached:
    """File a detached record of ``session``, its buffer holding ``frames`` 10-byte frames."""
    buffer = book.new_buffer()
    gone = released if released is not None else []
    record = Detached(
        token, "ann", "1.2", [{"id": "s", "destination": "/topic/t"}], buffer,
        lambda: gone.append(session), buffer.appended, session=session,
    )  # fmt: skip
    book.detach(record)
    for number in range(frames):
        buffer.append(b"%010d" % number)
    return record


def test_connected_sessions_and_their_buffers_are_counted_until_they_detach_or_end() -> None:
    """A connected session's buffer counts as connected bytes; detached, as detached bytes."""
    book = ResumeBook(Clock(), window=60, buffer_limit=1000)
    first, second = Session(), Session()
    one = book.issue("ann", first)
    two = book.issue("bob", second)
    book.new_buffer(one).append(b"x" * 30)
    book.new_buffer(two).append(b"y" * 12)
    assert (book.connected, book.connected_bytes, book.detached) == (2, 42, 0)
    book.forget(two, second)
    assert (book.connected, book.connected_bytes) == (1, 30)
    detach(book, one, "session-1", frames=2)
    assert (book.connected, book.connected_bytes, book.detached, book.buffered_bytes) == (
        0,
        0,
        1,
        20,
    )
    assert book.held_bytes() == 20


def test_resumes_refusals_and_expiries_are_counted() -> None:
    """A claim within the window counts as resumed; wrong tokens as refused; windows as expired."""
    clock = Clock()
    book = ResumeBook(clock, window=60)
    detach(book, "t1", "s1")
    detach(book, "t2", "s2")
    detach(book, "t3", "s3")
    assert book.claim("t1", "ann", "1.2") is not None
    assert book.claim("wrong", "ann", "1.2") is None
    assert book.claim("t2", "bob", "1.2") is None
    assert (book.resumed, book.refused, book.expired) == (1, 2, 0)
    clock.advance(60)
    assert book.detached == 0
    assert (book.resumed, book.refused, book.expired) == (1, 2, 2)
    assert book.claim("t3", "ann", "1.2") is None
    assert (book.refused, book.expired) == (3, 2)


def test_a_claim_at_the_close_of_the_window_counts_as_refused_and_expired() -> None:
    """A token presented as its window closes, before the timer ran, is refused and expires."""
    clock = Clock()
    book = ResumeBook(clock, window=60)
    released: list[str] = []
    detach(book, "t1", "s1", released=released)
    clock.rightNow = 60.0
    assert book.claim("t1", "ann", "1.2") is None
    assert (book.refused, book.expired, released) == (1, 1, ["s1"])


def test_the_listing_says_who_since_when_until_when_and_what_is_held_never_the_token() -> None:
    """sessions() lists detached records, soonest to expire first, with their times and ids."""
    clock = Clock()
    book = ResumeBook(clock, window=60, buffer_limit=1000)
    detach(book, "secret-1", "s1", frames=3)
    clock.advance(5)
    detach(book, "secret-2", "s2")
    first, second = book.sessions()
    assert (first.session, first.since, first.expires) == ("s1", 0.0, 60.0)
    assert (second.session, second.since, second.expires) == ("s2", 5.0, 65.0)
    assert (len(first.buffer), first.buffer.size, first.gap) == (3, 30, False)
    assert "secret-1" not in repr(first)


def test_an_operator_ends_a_detached_session_for_good() -> None:
    """end() releases its subscriptions and voids its token: a later claim is refused."""
    book = ResumeBook(Clock(), window=60)
    released: list[str] = []
    detach(book, "t1", "s1", released=released)
    assert book.end("nobody") is None
    ended = book.end("s1")
    assert ended is not None and ended.session == "s1"
    assert (released, book.ended, book.detached) == (["s1"], 1, 0)
    assert book.claim("t1", "ann", "1.2") is None
    assert book.refused == 1


def test_an_overflowing_buffer_shows_a_gap() -> None:
    """Once frames missed since the drop are dropped, the record's gap flag is up."""
    book = ResumeBook(Clock(), window=60, buffer_limit=40)
    record = detach(book, "t1", "s1", frames=4)
    assert not record.gap
    record.buffer.append(b"0123456789")
    assert record.gap and record.buffer.first > record.mark


def test_shedding_halves_detached_buffers_first_then_connected_ones() -> None:
    """shed() halves each detached buffer, oldest frames first; connected ones once none is left."""
    book = ResumeBook(Clock(), window=60, buffer_limit=10_000)
    token = book.issue("ann", Session())
    connected = book.new_buffer(token)
    for number in range(4):
        connected.append(b"%010d" % number)
    record = detach(book, "t1", "s1", frames=8)
    assert book.shed() == 40
    assert (record.buffer.size, record.gap, connected.size, book.shed_frames) == (40, True, 40, 4)
    assert book.shed() == 20
    assert book.shed() == 10
    assert book.shed() == 10
    assert record.buffer.size == 0 and connected.size == 40
    assert book.shed() == 20
    assert connected.size == 20 and connected.first == 2
    assert book.shed_frames == 10
