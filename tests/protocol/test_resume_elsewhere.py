"""
A session resumed from another node of a cluster (stompbroker.protocol.resume.part,
Resume.wait_for_resumed and after), against the recording broker and a
directory whose answers the test gives: nothing is read while the cluster is
asked; the topics are subscribed again before the keeping node is asked to let
go; its frames come first, then the held ones it did not carry.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from stompbroker.protocol.encoder import message_prefix
from stompbroker.protocol.message import Message
from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.protocol.resume.session_records import Handover, SessionRecord, Taken, token_key
from stompbroker.protocol.session import SessionConfig
from tests.support.session import RecordingBroker, frame, make_session

TOPIC = {"id": "t", "destination": "/topic/a"}
QUEUE = {"id": "q", "destination": "/queue/b", "ack": "client"}


class Directory:
    """A directory whose every answer is a Deferred the test fires."""

    def __init__(self) -> None:
        self.up = True
        self.taking: list[tuple[str, str, str, Deferred[Any]]] = []
        self.asking: list[tuple[str, str, Any, Deferred[Any]]] = []
        self.filed: dict[str, SessionRecord] = {}

    def available(self) -> bool:
        return self.up

    def file(self, key: str, record: SessionRecord) -> None:
        self.filed[key] = record

    def drop(self, key: str) -> None:
        self.filed.pop(key, None)

    def take(self, key: str, login: str, version: str) -> Deferred[Any]:
        answer: Deferred[Any] = Deferred()
        self.taking.append((key, login, version, answer))
        return answer

    def hand_over(self, node: str, key: str, last: Any) -> Deferred[Any]:
        answer: Deferred[Any] = Deferred()
        self.asking.append((node, key, last, answer))
        return answer


def clustered() -> tuple[SessionConfig, Directory]:
    book = ResumeBook(Clock())
    directory = Directory()
    book.directory = directory
    return SessionConfig(heartbeat=(0, 0), resumption=book), directory


def resuming(
    config: SessionConfig, token: str = "tok", *extra: tuple[str, str]
) -> tuple[Any, Any, RecordingBroker]:
    broker = RecordingBroker()
    session, transport, _, _ = make_session(broker, config)
    session.receive_data(
        frame("CONNECT", ("accept-version", "1.2"), ("resume-token", token), *extra)
        + frame("SEND", ("destination", "/topic/z"), body=b"after")
    )
    return session, transport, broker


def message(n: int) -> Message:
    return Message("/topic/a", f"node-{n}", (), f"m{n}".encode())


def encoded(n: int) -> bytes:
    tail = f"destination:/topic/a\nmessage-id:node-{n}\n\nm{n}\x00"
    return message_prefix("t", "1.2") + tail.encode()


def test_the_session_waits_for_the_cluster_without_answering_or_reading() -> None:
    """Until the directory answers there is no CONNECTED, and frames sent meanwhile wait."""
    config, directory = clustered()
    session, transport, broker = resuming(config)
    [(key, login, version, _)] = directory.taking
    assert (key, login, version) == (token_key("tok"), "", "1.2")
    assert transport.frames() == []
    assert not transport.reading
    assert not any(call[0] == "send" for call in broker.calls)


def test_a_token_the_cluster_does_not_know_is_a_fresh_session() -> None:
    """resumed:false, and the held SEND is handled after CONNECTED."""
    config, directory = clustered()
    session, transport, broker = resuming(config)
    directory.taking[0][3].callback(None)
    [connected] = transport.frames()
    assert connected.get("resumed") == "false"
    assert transport.reading
    assert any(call[0] == "send" for call in broker.calls)
    book = config.resumption
    assert (book.refused, book.resumed) == (1, 0)


def test_a_dead_nodes_session_comes_back_from_its_record_with_a_gap() -> None:
    """The record alone: same subscriptions and ids, resume-gap:true (the buffer died with it)."""
    config, directory = clustered()
    session, transport, broker = resuming(config)
    record = SessionRecord("", "1.2", (TOPIC, QUEUE))
    directory.taking[0][3].callback(Taken(record, False, False, "dead"))
    [connected] = transport.frames()
    assert connected.get("resumed") == "true"
    assert connected.get("resume-gap") == "true"
    assert [s.subscription_id for s in broker.subscribers] == ["t", "q"]
    assert directory.asking == []
    book = config.resumption
    assert (book.resumed, book.gaps, book.refused) == (1, 1, 0)


def test_a_live_nodes_session_is_subscribed_to_its_topics_before_the_node_is_asked() -> None:
    """
    The topic subscription is in the broker, holding, when the keeping node is
    asked; the handover's frames come first, then the held ones it did not have.
    """
    config, directory = clustered()
    session, transport, broker = resuming(
        config,
        "tok",
        ("resume-last-subscription", "t"),
        ("resume-last-message-id", "node-0"),
    )
    record = SessionRecord("", "1.2", (TOPIC, QUEUE))
    directory.taking[0][3].callback(Taken(record, False, True, "other"))
    [(node, key, last, asked)] = directory.asking
    assert (node, key, last) == ("other", token_key("tok"), ("t", "node-0"))
    [topic] = broker.subscribers
    assert topic.subscription_id == "t"
    # Live messages reach the new subscription while the old node hands over.
    for n in (2, 3, 4):
        topic.deliver(message(n))
    assert transport.frames() == []
    queue_headers = {"id": "q", "destination": "/queue/b", "ack": "client"}
    asked.callback(Handover((TOPIC, queue_headers), (encoded(1), encoded(2)), False))
    frames = transport.frames()
    assert frames[0].command == "CONNECTED"
    assert frames[0].get("resumed") == "true"
    assert frames[0].get("resume-gap") is None
    assert [f.get("message-id") for f in frames[1:]] == [f"node-{n}" for n in (1, 2, 3, 4)]
    assert [s.subscription_id for s in broker.subscribers] == ["t", "q"]
    topic.deliver(message(5))
    assert [f.get("message-id") for f in transport.frames()] == ["node-5"]


def test_a_resume_refused_here_still_makes_the_keeping_node_let_go() -> None:
    """
    A subscription this node refuses (here a bad ack mode; access rights in
    life): nothing stays subscribed, and the keeping node is still asked for the
    session, so that its copy, which nobody can claim any more, goes at once.
    """
    config, directory = clustered()
    session, transport, broker = resuming(config)
    bad = {"id": "b", "destination": "/topic/b", "ack": "sometimes"}
    record = SessionRecord("", "1.2", (TOPIC, bad))
    directory.taking[0][3].callback(Taken(record, False, True, "other"))
    [(node, key, last, _)] = directory.asking
    assert (node, key, last) == ("other", token_key("tok"), None)
    assert broker.subscribers == []
    connected, error = transport.frames()
    assert (connected.command, error.command) == ("CONNECTED", "ERROR")
    assert error.get("message") == "invalid ack mode"
    assert broker.calls[-1][0] == "close_connection"


def test_a_node_that_does_not_hand_over_in_time_leaves_a_gap() -> None:
    """No handover (timeout, or the session gone there): the record's subscriptions, resume-gap."""
    config, directory = clustered()
    session, transport, broker = resuming(config)
    record = SessionRecord("", "1.2", (TOPIC,))
    directory.taking[0][3].callback(Taken(record, False, True, "other"))
    [topic] = broker.subscribers
    topic.deliver(message(7))
    directory.asking[0][3].callback(None)
    frames = transport.frames()
    assert frames[0].get("resume-gap") == "true"
    assert [f.get("message-id") for f in frames[1:]] == ["node-7"]
    assert broker.subscribers == [topic]


def test_a_subscription_dropped_on_the_old_node_is_not_kept() -> None:
    """The handover's subscriptions win over the record's (an UNSUBSCRIBE not filed yet)."""
    config, directory = clustered()
    session, transport, broker = resuming(config)
    record = SessionRecord("", "1.2", (TOPIC,))
    directory.taking[0][3].callback(Taken(record, False, True, "other"))
    directory.asking[0][3].callback(Handover((), (), False))
    assert broker.subscribers == []
    assert session.subscriptions.by_id == {}


def test_a_client_that_goes_while_the_cluster_is_asked_leaves_nothing_subscribed() -> None:
    """The wait is cancelled and the subscriptions made for it given back."""
    config, directory = clustered()
    session, transport, broker = resuming(config)
    directory.taking[0][3].callback(Taken(SessionRecord("", "1.2", (TOPIC,)), False, True, "o"))
    session.connection_lost()
    assert broker.subscribers == []
    assert directory.asking[0][3].called


def test_a_directory_that_cannot_answer_leaves_the_resume_to_this_node() -> None:
    """Redis unreachable: the book of this node is asked, as on one node (here: unknown)."""
    config, directory = clustered()
    session, transport, _ = resuming(config)
    directory.taking[0][3].errback(ConnectionError("gone"))
    [connected] = transport.frames()
    assert connected.get("resumed") == "false"
    directory.up = False
    session, transport, _ = resuming(config)
    assert len(directory.taking) == 1
    assert transport.frames()[0].get("resumed") == "false"


def test_the_session_this_node_keeps_is_claimed_from_its_book() -> None:
    """Taken with here=True: the book's record is claimed, as on one node."""
    config, directory = clustered()
    first, transport, broker = resuming(config, "")
    directory_token = transport.frames()[0].get("resume-token")
    assert directory_token is not None
    assert directory.taking == []
    first.receive_data(frame("SUBSCRIBE", *TOPIC.items()))
    first.connection_lost()
    again, transport, broker = resuming(config, directory_token)
    record = directory.filed[token_key(directory_token)]
    directory.taking[0][3].callback(Taken(record, True, True, "me"))
    [connected] = transport.frames()
    assert connected.get("resumed") == "true"
    assert [s.subscription_id for s in broker.subscribers] == ["t"]
