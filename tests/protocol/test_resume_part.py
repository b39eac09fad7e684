"""
The session's resume part (stompbroker.protocol.resume.part.Resume) built alone on
a stand-in for the session (:class:`Owner`, which holds a real subscriptions part
over a recording broker) and a real ``ResumeBook`` on a ``task.Clock``, without a
session: CONNECT's token, CONNECTED's headers, detaching and taking up again.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.resume.part import Resume
from stompbroker.protocol.resume.registry import ResumeBook
from stompbroker.protocol.states import Event, State
from stompbroker.protocol.subscriptions import Subscriptions
from tests.support.session import RecordingBroker


class Owner:
    """A stand-in for the session: the ``ResumeOwner`` a :class:`Resume` makes resumable."""

    def __init__(self, book: ResumeBook | None) -> None:
        self.config = SessionConfig(resumption=book)
        self.state = State.CONNECTED
        self.version = "1.2"
        self.identity: Any = None
        self.client_id: str | None = None
        self.session_id = "s1"
        self.broker = RecordingBroker()
        self.subscriptions = Subscriptions(self, self.broker)
        self.resume = Resume(self)
        self.written: list[tuple[bytes, int]] = []
        self.failed: list[str] = []
        self.waiting: Any = None

    # What the subscriptions part needs of its session.
    @property
    def output(self) -> Owner:
        """The output part stand-in is the owner itself: it records what is written."""
        return self

    def write_message(self, data: bytes) -> None:
        self.written.append((data, 1))

    def write_delivery(self, data: bytes) -> None:
        self.written.append((data, 1))

    # What the resume part needs.
    def write_messages(self, data: bytes, count: int) -> None:
        self.written.append((data, count))

    def _fail(self, error: ProtocolError, event: Event = Event.ERROR) -> None:
        self.failed.append(error.message)

    @property
    def login(self) -> Owner:
        """The login part stand-in is the owner itself: it keeps the answer awaited."""
        return self

    def wait_on(self, answer: Any) -> None:
        self.waiting = answer

    def _transition(self, event: Event) -> None:
        raise AssertionError(f"no state change expected here, got {event}")

    def _close(self, event: Event) -> None:
        self.state = State.CLOSING


def connect(resume: Resume, token: str) -> tuple[tuple[tuple[str, str], ...], Any]:
    resume.read(Frame("CONNECT", (("resume-token", token),)))
    return resume.headers()


def test_a_session_that_does_not_ask_is_not_resumable() -> None:
    owner = Owner(ResumeBook(Clock()))
    resume = owner.resume
    resume.read(Frame("CONNECT"))
    assert resume.headers() == ((), None)
    assert resume.recent_writer() is None
    resume.detach()
    assert owner.broker.named("unsubscribe") == []


def test_an_empty_token_gets_a_fresh_resumable_session() -> None:
    owner = Owner(ResumeBook(Clock()))
    headers, resumed = connect(owner.resume, "")
    assert dict(headers)["resumed"] == "false"
    assert dict(headers)["resume-token"] == owner.resume.resume_token
    assert resumed is None
    assert owner.resume.recent_writer() is not None


def test_a_detached_session_keeps_its_topics_and_is_taken_up_again() -> None:
    book = ResumeBook(Clock())
    old = Owner(book)
    headers, _ = connect(old.resume, "")
    token = dict(headers)["resume-token"]
    topic = old.subscriptions.new(Frame("SUBSCRIBE", (("id", "t"), ("destination", "/topic/a"))))
    old.subscriptions.add(topic)
    queue = old.subscriptions.new(Frame("SUBSCRIBE", (("id", "q"), ("destination", "/queue/a"))))
    old.subscriptions.add(queue)
    old.resume.detach()
    assert old.broker.named("unsubscribe") == [queue]
    assert len(old.subscriptions) == 0
    topic._write(b"missed")
    new = Owner(book)
    headers, resumed = connect(new.resume, token)
    assert dict(headers)["resumed"] == "true"
    new.resume.resume(resumed)
    assert [s.subscription_id for s in new.subscriptions.values()] == ["t", "q"]
    assert new.written == [(b"missed", 1)]
    assert old.broker.named("unsubscribe") == [queue, topic]


def test_a_token_still_connected_is_taken_over() -> None:
    """The client noticed the drop before the broker: the old session detaches and closes."""
    book = ResumeBook(Clock())
    old = Owner(book)
    headers, _ = connect(old.resume, "")
    new = Owner(book)
    headers, resumed = connect(new.resume, dict(headers)["resume-token"])
    assert old.state is State.CLOSING
    assert dict(headers)["resumed"] == "true"


def test_ending_voids_the_token() -> None:
    book = ResumeBook(Clock())
    owner = Owner(book)
    headers, _ = connect(owner.resume, "")
    token = dict(headers)["resume-token"]
    owner.resume.end()
    assert owner.resume.resume_token is None
    again = Owner(book)
    headers, resumed = connect(again.resume, token)
    assert (dict(headers)["resumed"], resumed) == ("false", None)
