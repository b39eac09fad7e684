"""
The session's resume part (stompbroker.protocol.resume.part.Resume) built alone on
the real parts it is given (subscriptions and output over a recording broker and
transport, the session's state) and a real ``ResumeBook`` on a ``task.Clock``,
without a session or a stand-in for one: CONNECT's token, CONNECTED's headers,
detaching and taking up again.
"""

from __future__ import annotations

from typing import Any

from attrs import define
from twisted.internet.task import Clock

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.resume.directory_lookup import Waiting
from stompbroker.protocol.resume.part import Resume
from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.protocol.slow_consumer import SlowConsumer
from stompbroker.protocol.states import State
from stompbroker.protocol.subscriptions import Subscriptions
from tests.support.broker import FakeConnection
from tests.support.parts import Failures, reading
from tests.support.session import FakeTransport, RecordingBroker


@define
class Who:
    """Who the client is, as its login part says (``Identified``)."""

    identity: Any = None


class Made:
    """A :class:`Resume` and what it was given, each real or recording."""

    def __init__(self, book: ResumeBook | None) -> None:
        config = SessionConfig(resumption=book)
        self.failures = Failures()
        self.life = self.failures.life
        self.broker = RecordingBroker()
        self.transport = FakeTransport()
        connection = FakeConnection("s1")
        self.output = SlowConsumer(
            connection,
            connection.subscribers,
            connection.describe,
            self.broker,
            self.transport,
            Clock(),
            config,
            self.life,
            reading()[0],
            self.failures,
        )
        who = Who()
        self.subscriptions = Subscriptions(connection, self.broker, self.output, who, config)
        #: What the session was asked to do while waiting for the cluster (never, here).
        self.waits: list[Any] = []
        self.resume = Resume(
            book,
            self.life,
            self.subscriptions,
            who,
            self.output,
            self.failures,
            self.life.move,
            Waiting(
                lambda: self.waits.append("start"),
                self.waits.append,
                lambda: self.waits.append("in"),
            ),
        )


def connect(resume: Resume, token: str) -> tuple[tuple[tuple[str, str], ...], Any]:
    resume.read(Frame("CONNECT", (("resume-token", token),)), "1.2")
    return resume.headers("s1")


def test_a_session_that_does_not_ask_is_not_resumable() -> None:
    owner = Made(ResumeBook(Clock()))
    resume = owner.resume
    resume.read(Frame("CONNECT"), "1.2")
    assert resume.headers("s1") == ((), None)
    assert resume.recent_writer() is None
    resume.detach()
    assert owner.broker.named("unsubscribe") == []
    # Without a cluster's directory, nothing waits before CONNECTED.
    assert owner.waits == []


def test_an_empty_token_gets_a_fresh_resumable_session() -> None:
    owner = Made(ResumeBook(Clock()))
    headers, resumed = connect(owner.resume, "")
    assert dict(headers)["resumed"] == "false"
    assert dict(headers)["resume-token"] == owner.resume.resume_token
    assert resumed is None
    assert owner.resume.recent_writer() is not None


def test_a_detached_session_keeps_its_topics_and_is_taken_up_again() -> None:
    book = ResumeBook(Clock())
    old = Made(book)
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
    new = Made(book)
    headers, resumed = connect(new.resume, token)
    assert dict(headers)["resumed"] == "true"
    new.resume.resume(resumed)
    assert [s.subscription_id for s in new.subscriptions.values()] == ["t", "q"]
    assert new.transport.take() == b"missed"
    assert new.output.frames_sent == 1
    assert old.broker.named("unsubscribe") == [queue, topic]


def test_a_token_still_connected_is_taken_over() -> None:
    """The client noticed the drop before the broker: the old session detaches and closes."""
    book = ResumeBook(Clock())
    old = Made(book)
    headers, _ = connect(old.resume, "")
    new = Made(book)
    headers, resumed = connect(new.resume, dict(headers)["resume-token"])
    assert old.life.state is State.CLOSING
    assert dict(headers)["resumed"] == "true"


def test_ending_voids_the_token() -> None:
    book = ResumeBook(Clock())
    owner = Made(book)
    headers, _ = connect(owner.resume, "")
    token = dict(headers)["resume-token"]
    owner.resume.end()
    assert owner.resume.resume_token is None
    again = Made(book)
    headers, resumed = connect(again.resume, token)
    assert (dict(headers)["resumed"], resumed) == ("false", None)
