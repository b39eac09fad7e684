"""
The cluster's part in resumable sessions, the pure bookkeeping
(stompbroker.protocol.resume.session_records, and ResumeBook with a directory): what a
node files, when, under what key, and what it hands over, on ``task.Clock``
against a recording directory.
"""

from __future__ import annotations

import hashlib
from typing import Any

from twisted.internet.task import Clock

from stompbroker.protocol.encoder import message_prefix
from stompbroker.protocol.resume.resume_book import Detached, ResumeBook
from stompbroker.protocol.resume.session_records import (
    SessionRecord,
    frame_identity,
    signature,
    subscription_id,
    token_key,
)


class Directory:
    """Records what a book files and drops, as the redis engine's directory would keep it."""

    def __init__(self) -> None:
        self.records: dict[str, SessionRecord] = {}
        self.writes = 0

    def file(self, key: str, record: SessionRecord) -> None:
        self.writes += 1
        self.records[key] = record

    def drop(self, key: str) -> None:
        self.records.pop(key, None)


class Subscription:
    numbers = iter(range(1, 1000))

    def __init__(self, headers: dict[str, str], last_stream_offset: int | None = None) -> None:
        self.headers = headers
        self.last_stream_offset = last_stream_offset
        self.number = next(self.numbers)


class Live:
    """Stands in for a connected resumable session."""

    def __init__(self, book: ResumeBook) -> None:
        self.book = book
        self.version = "1.2"
        self.subscriptions: dict[str, Any] = {}
        self.token = ""
        self.taken = False

    def resume_subscriptions(self) -> list[dict[str, str]]:
        return [dict(s.headers) for s in self.subscriptions.values()]

    def take_over(self) -> None:
        self.taken = True
        buffer = self.book.new_buffer()
        for n in range(3):
            buffer.append(message_prefix("t", "1.2") + f"message-id:n-{n}\n\nm{n}\x00".encode())
        self.book.detach(
            Detached(self.token, "ann", "1.2", self.resume_subscriptions(), buffer, lambda: None)
        )


def clustered() -> tuple[ResumeBook, Directory, Clock]:
    clock = Clock()
    book = ResumeBook(clock, window=60)
    directory = Directory()
    book.directory = directory
    return book, directory, clock


def test_a_records_key_is_the_sha256_of_its_token_never_the_token() -> None:
    """Tokens are secrets: the cluster sees only their hash."""
    key = token_key("secret-token")
    assert key == hashlib.sha256(b"secret-token").hexdigest()
    assert "secret-token" not in key


def test_issuing_a_token_files_the_sessions_record_under_its_key() -> None:
    """A connected resumable session is findable by any node as soon as it has its token."""
    book, directory, _ = clustered()
    session = Live(book)
    session.subscriptions["t"] = Subscription({"id": "t", "destination": "/topic/a"})
    token = book.issue("ann", session)
    assert directory.records == {
        token_key(token): SessionRecord("ann", "1.2", ({"id": "t", "destination": "/topic/a"},))
    }


def test_refresh_files_again_only_what_changed() -> None:
    """A quiet session costs no write; a SUBSCRIBE or a stream's progress costs one per refresh."""
    book, directory, _ = clustered()
    session = Live(book)
    stream = Subscription({"id": "s", "destination": "/stream/x"}, 4)
    session.subscriptions["s"] = stream
    book.issue("ann", session)
    book.refresh()
    assert directory.writes == 1
    session.subscriptions["t"] = Subscription({"id": "t", "destination": "/topic/a"})
    book.refresh()
    book.refresh()
    assert directory.writes == 2
    stream.last_stream_offset = 9
    book.refresh()
    assert directory.writes == 3


def test_detaching_files_the_record_and_its_end_drops_it() -> None:
    """Detached, the record says what to subscribe again; claimed, expired or forgotten it goes."""
    book, directory, clock = clustered()
    session = Live(book)
    session.token = book.issue("ann", session)
    session.subscriptions["t"] = Subscription({"id": "t", "destination": "/topic/a"})
    session.take_over()
    key = token_key(session.token)
    assert directory.records[key].subscriptions == ({"id": "t", "destination": "/topic/a"},)
    clock.advance(61)
    assert directory.records == {}
    other = Live(book)
    token = book.issue("ann", other)
    book.forget(token, other)
    assert directory.records == {}


def test_an_operator_ended_session_drops_its_record() -> None:
    """Ended through the API, the session cannot be resumed from its record on another node."""
    book, directory, _ = clustered()
    session = Live(book)
    session.token = book.issue("ann", session)
    session.subscriptions["t"] = Subscription({"id": "t", "destination": "/topic/a"})
    session.take_over()
    [record] = book.sessions()
    assert token_key(session.token) in directory.records
    assert book.end(record.session) is record
    assert directory.records == {}


def test_a_session_left_at_a_stop_stays_filed_with_its_subscriptions_now() -> None:
    """
    The broker stops: the record is filed afresh and left for another node,
    and this book no longer knows the token (nothing here drops the record).
    """
    book, directory, _ = clustered()
    session = Live(book)
    token = book.issue("ann", session)
    session.subscriptions["t"] = Subscription({"id": "t", "destination": "/topic/a"})
    book.leave(token, session)
    key = token_key(token)
    assert directory.records[key].subscriptions == ({"id": "t", "destination": "/topic/a"},)
    assert book.connected == 0
    book.forget(token, session)
    book.close()
    assert key in directory.records


def test_on_one_node_a_session_left_at_a_stop_ends() -> None:
    """Without a cluster, leaving is ending: the token is void."""
    book = ResumeBook(Clock(), window=60)
    session = Live(book)
    token = book.issue("ann", session)
    book.leave(token, session)
    assert book.claim(token, "ann", "1.2") is None
    assert book.connected == 0


def test_a_local_claim_drops_the_record() -> None:
    """Resumed on its own node, the session's old record cannot be taken by another."""
    book, directory, _ = clustered()
    session = Live(book)
    session.token = book.issue("ann", session)
    session.take_over()
    assert book.claim(session.token, "ann", "1.2") is not None
    assert directory.records == {}


def test_hand_over_takes_a_live_session_over_and_gives_what_followed_the_clients_last() -> None:
    """Another node resumes it: the old connection goes, the frames after the client's last come."""
    book, directory, _ = clustered()
    session = Live(book)
    session.token = book.issue("ann", session)
    session.subscriptions["t"] = Subscription({"id": "t", "destination": "/topic/a"})
    handover = book.hand_over(token_key(session.token), ("t", "n-0"))
    assert session.taken
    assert handover is not None
    assert [frame_identity(data) for data in handover.frames] == [(b"t", b"n-1"), (b"t", b"n-2")]
    assert handover.subscriptions == ({"id": "t", "destination": "/topic/a"},)
    assert not handover.gap
    assert directory.records == {}
    assert book.detached == 0
    assert book.hand_over(token_key(session.token), None) is None


def test_hand_over_of_an_unknown_key_is_none() -> None:
    """A key this node never filed (or gave up already) hands nothing over."""
    book, _, _ = clustered()
    assert book.hand_over(token_key("nobody"), None) is None


def test_frame_identity_reads_subscription_and_message_id_from_the_headers_only() -> None:
    """A body that looks like headers does not count (STOMP 1.2, "Frames and Headers")."""
    data = b"MESSAGE\nsubscription:t\ndestination:/topic/a\nmessage-id:n-1\n\nmessage-id:x\x00"
    assert frame_identity(data) == (b"t", b"n-1")
    assert frame_identity(b"MESSAGE\ndestination:/topic/a\n\n\x00") == (None, None)
    crlf = b"MESSAGE\r\nmessage-id:n-2\r\nsubscription:s\r\n\r\nbody\x00"
    assert frame_identity(crlf) == (b"s", b"n-2")


def test_signature_and_subscription_id() -> None:
    """Same subscriptions, same signature; a 1.0 SUBSCRIBE without id is named by destination."""
    one = Subscription({"id": "a"})
    assert signature({"a": one}) == signature({"a": one})
    assert signature({"a": one}) != signature({"a": Subscription({"id": "a"})})
    assert subscription_id({"destination": "/topic/x"}) == "/topic/x"
    assert subscription_id({"id": "i", "destination": "/topic/x"}) == "i"


def test_a_subscription_made_again_under_the_same_id_is_filed_again() -> None:
    """UNSUBSCRIBE then SUBSCRIBE of the same id elsewhere, between two refreshes, is a change."""
    book, directory, _ = clustered()
    session = Live(book)
    session.subscriptions["t"] = Subscription({"id": "t", "destination": "/topic/a"})
    token = book.issue("ann", session)
    session.subscriptions["t"] = Subscription({"id": "t", "destination": "/topic/b"})
    book.refresh()
    assert directory.records[token_key(token)].subscriptions == (
        {"id": "t", "destination": "/topic/b"},
    )
