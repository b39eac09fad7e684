"""
The bookkeeping of resumable sessions (stompbroker.protocol.resume.resume_book): tokens,
the bounded buffer, the window, claims, on a ``task.Clock``.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from stompbroker.protocol.resume.resume_book import (
    Detached,
    ResumeBook,
    ResumeBuffer,
    new_token,
    resubscribe_headers,
)


def record(
    book: ResumeBook, token: str, login: str = "ann", released: list[str] | None = None
) -> Detached:
    """:returns: a detached record filed under ``token``, noting its release in ``released``."""
    gone = released if released is not None else []
    detached = Detached(token, login, "1.2", [], book.new_buffer(), lambda: gone.append(token))
    book.detach(detached)
    return detached


class Session:
    """Stands in for a connected session: records being taken over."""

    def __init__(self, book: ResumeBook, token_of: dict[str, str]) -> None:
        self.book = book
        self.token_of = token_of
        self.taken = False

    def take_over(self) -> None:
        self.taken = True
        record(self.book, self.token_of["token"])


def test_tokens_are_128_bits_of_url_safe_text_and_differ() -> None:
    """A token is 22 URL-safe characters (16 random bytes), a new one each time."""
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    assert all(
        len(token) == 22 and token.replace("-", "a").replace("_", "a").isalnum() for token in tokens
    )


def test_the_buffer_keeps_frames_in_order_and_drops_the_oldest_past_its_limit() -> None:
    """Frames keep their ordinals; past the limit the oldest go; a replay needing them says so."""
    buffer = ResumeBuffer(10)
    buffer.append(b"aaaa")
    buffer.append(b"bbbb")
    assert buffer.replay(None, 0) == ([b"aaaa", b"bbbb"], False)
    buffer.append(b"cccc")
    assert buffer.size == 8 and buffer.first == 1 and buffer.appended == 3
    assert buffer.replay(None, 0) == ([b"bbbb", b"cccc"], True)
    assert buffer.replay(None, 1) == ([b"bbbb", b"cccc"], False)
    assert buffer.replay(1, 0) == ([b"cccc"], False)
    assert buffer.replay(None, 3) == ([], False)


def test_a_frame_larger_than_the_buffer_is_not_kept() -> None:
    """One frame over the limit is not kept at all: a replay that needed it is a gap."""
    buffer = ResumeBuffer(3)
    buffer.append(b"toolong")
    assert len(buffer) == 0
    assert buffer.replay(None, 0) == ([], True)


def test_find_names_a_frame_by_subscription_and_message_id_in_its_headers_only() -> None:
    """The client's last message is found by its subscription and message-id, never in a body."""
    buffer = ResumeBuffer(1000)
    buffer.append(b"MESSAGE\nsubscription:a\nmessage-id:n-1\n\nbody\0")
    buffer.append(b"MESSAGE\nsubscription:b\nmessage-id:n-1\n\nbody\0")
    buffer.append(b"MESSAGE\nsubscription:a\nmessage-id:n-2\n\n\nmessage-id:n-9\n\0")
    assert buffer.find(b"MESSAGE\nsubscription:a\n", "n-1") == 0
    assert buffer.find(b"MESSAGE\nsubscription:b\n", "n-1") == 1
    assert buffer.find(b"MESSAGE\nsubscription:a\n", "n-2") == 2
    assert buffer.find(b"MESSAGE\nsubscription:a\n", "n-9") is None


def test_a_claim_within_the_window_returns_the_record_once() -> None:
    """The token, the same login and version within the window get the record, and only once."""
    clock = Clock()
    book = ResumeBook(clock, window=120, buffer_limit=100)
    detached = record(book, "t1")
    clock.advance(119)
    assert book.claim("t1", "ann", "1.2") is detached
    assert book.claim("t1", "ann", "1.2") is None
    assert book.detached == 0


def test_another_users_token_is_refused_and_left_for_its_owner() -> None:
    """A token presented by another login is as a wrong one, and its owner may still resume."""
    clock = Clock()
    book = ResumeBook(clock)
    detached = record(book, "t1", login="ann")
    assert book.claim("t1", "bob", "1.2") is None
    assert book.claim("wrong", "ann", "1.2") is None
    assert book.claim("t1", "ann", "1.2") is detached


def test_records_expire_after_the_window_with_one_timer_and_are_released() -> None:
    """Past the window each record is released, in the order filed, by one timer at a time."""
    clock = Clock()
    book = ResumeBook(clock, window=10)
    released: list[str] = []
    record(book, "t1", released=released)
    clock.advance(4)
    record(book, "t2", released=released)
    assert len(clock.getDelayedCalls()) == 1
    clock.advance(6)
    assert released == ["t1"]
    assert book.claim("t1", "ann", "1.2") is None
    clock.advance(4)
    assert released == ["t1", "t2"]
    assert clock.getDelayedCalls() == [] and book.detached == 0


def test_a_claim_in_another_protocol_version_fails_and_releases_the_record() -> None:
    """Frames kept in 1.2 cannot be given to a 1.1 client: it starts fresh and the record goes."""
    book = ResumeBook(Clock())
    released: list[str] = []
    record(book, "t1", released=released)
    assert book.claim("t1", "ann", "1.1") is None
    assert released == ["t1"]


def test_claiming_a_live_session_takes_it_over_first() -> None:
    """A token whose session still looks connected detaches that session, then is claimed."""
    book = ResumeBook(Clock())
    token_of: dict[str, str] = {}
    session = Session(book, token_of)
    token_of["token"] = book.issue("ann", session)
    claimed = book.claim(token_of["token"], "ann", "1.2")
    assert session.taken and claimed is not None


def test_a_live_session_is_not_taken_over_by_another_login() -> None:
    """Another login's CONNECT with a live session's token leaves that session alone."""
    book = ResumeBook(Clock())
    token_of: dict[str, str] = {}
    session = Session(book, token_of)
    token_of["token"] = book.issue("ann", session)
    assert book.claim(token_of["token"], "bob", "1.2") is None
    assert not session.taken


def test_forget_only_voids_the_token_for_its_own_session() -> None:
    """A session forgets its own token; a stranger that presented it cannot void it."""
    book = ResumeBook(Clock())
    owner: Any = Session(book, {})
    token = book.issue("ann", owner)
    book.forget(token, object())
    assert book._live[token][1] is owner
    book.forget(token, owner)
    assert token not in book._live


def test_close_releases_every_record() -> None:
    """A stopping broker lets every detached session go and leaves no timer."""
    clock = Clock()
    book = ResumeBook(clock)
    released: list[str] = []
    record(book, "t1", released=released)
    record(book, "t2", released=released)
    book.close()
    assert released == ["t1", "t2"] and clock.getDelayedCalls() == []


def test_resubscribe_headers_drop_the_receipt_and_resume_a_stream_after_its_last_offset() -> None:
    """A subscription is made again without its receipt; a stream's from the next offset."""
    headers = {"id": "s", "destination": "/stream/s", "receipt": "r", "ack": "client"}
    assert resubscribe_headers(headers) == {"id": "s", "destination": "/stream/s", "ack": "client"}
    assert resubscribe_headers(headers, 41)["x-stream-offset"] == "offset=42"
