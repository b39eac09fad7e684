"""
Resumable sessions on the redis engine (docs/cluster.md, "Resuming a session on
another node"): a real ``redis-server`` and ``twistd`` nodes.  A session resumes
on the node that kept it or on any other, whatever node the messages were
published on; a node that dies takes what it buffered with it, and the resume
says so.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import connect, publish, through
from tests.support.passwords import write_users
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, node, redis_server, started_nodes  # noqa: F401
from tests.support.resume import Session, cut, resumable, subscribed


@pytest.fixture(scope="module")
def pair(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Two nodes, A and B, on one Redis server."""
    with started_nodes(tmp_path_factory, redis_server, "ab") as started:
        yield started


def test_a_session_resumes_on_its_node_with_what_another_node_published(
    pair: list[BrokerProcess],
) -> None:
    """Messages published on B while the client of A was away come back on A, in order."""
    a, b = pair
    first, inbox = subscribed(a, "/topic/cluster-resume", "c")
    cut(first)
    publish(b.address, "/topic/cluster-resume", [f"m{n}" for n in range(20)])
    again, back = resumable(a, inbox.connected["resume-token"])
    try:
        assert back.connected["resumed"] == "true"
        through(back, (b.address, "/topic/cluster-resume"))
        assert [body.decode() for body in back.bodies()] == [f"m{n}" for n in range(20)]
    finally:
        again.disconnect()


def numbered(prefix: str, numbers: range) -> list[str]:
    return [f"{prefix}{n}" for n in numbers]


def by_subscription(messages: list[Any], subscription: str) -> list[str]:
    return [
        message.body.decode()
        for message in messages
        if message.headers.get("subscription") == subscription
    ]


def topic_and_stream(broker: BrokerProcess, name: str) -> tuple[Any, Any, str, str]:
    """
    :returns: a resumable connection to ``broker`` subscribed to a topic (id
        ``t``) and a stream (id ``s``, from ``next``), its listener, and the
        two destinations.
    """
    topic, stream = f"/topic/anynode.{name}", f"/stream/anynode.{name}"
    connection, inbox = subscribed(broker, topic, "t")
    connection.subscribe(stream, id="s", receipt="stream", **{"x-stream-offset": "next"})
    assert inbox.wait_for(lambda: "stream" in inbox.receipts)
    return connection, inbox, topic, stream


def test_a_session_resumes_on_another_node_with_every_message_once_and_in_order(
    pair: list[BrokerProcess],
) -> None:
    """
    A client of A, cut, resumes on B: both subscriptions back with their ids,
    what A and B published meanwhile once each and in order, then the live flow.
    """
    a, b = pair
    first, inbox, topic, stream = topic_and_stream(a, uuid.uuid4().hex[:8])
    publish(a.address, topic, numbered("t", range(5)))
    publish(b.address, stream, numbered("s", range(5)))
    assert inbox.wait_for(lambda: len(inbox.messages) == 10)
    cut(first)
    publish(a.address, topic, numbered("t", range(5, 15)))
    publish(b.address, topic, numbered("t", range(15, 25)))
    publish(a.address, stream, numbered("s", range(5, 15)))
    publish(b.address, stream, numbered("s", range(15, 25)))
    again, back = resumable(b, inbox.connected["resume-token"])
    try:
        assert back.connected["resumed"] == "true"
        assert "resume-gap" not in back.connected
        publish(a.address, topic, numbered("t", range(25, 30)))
        publish(b.address, stream, numbered("s", range(25, 30)))
        through(back, (a.address, topic), (b.address, topic), (b.address, stream))
        got = inbox.messages + back.messages
        assert by_subscription(got, "t") == numbered("t", range(30))
        assert by_subscription(got, "s") == numbered("s", range(30))
        assert {message.headers["subscription"] for message in back.messages} == {"t", "s"}
    finally:
        again.disconnect()


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_session_of_a_node_that_goes_resumes_elsewhere_with_a_gap(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
    how: str,
) -> None:
    """
    The node that kept a session goes: SIGKILLed (a crash), or stopped with
    SIGTERM (a rolling restart), which tells the client to connect again.  On
    another node the client gets its subscriptions back (same ids), told that
    messages were lost, and the live flow; its stream goes on from its last
    offset known to the cluster: filed by the once-a-second refresh before a
    crash, filed at the stop itself (no wait for a refresh) when stopped.
    """
    going = node(tmp_path / "going", redis_server)
    other = node(tmp_path / "other", redis_server)
    try:
        first, inbox, topic, stream = topic_and_stream(going, f"gone.{how}")
        publish(going.address, stream, numbered("s", range(3)))
        assert inbox.wait_for(lambda: len(inbox.messages) == 3)
        if how == "kill":
            time.sleep(1.5)  # the once-a-second refresh files the stream's offset
            going.kill()  # the client's connection dies with it
        else:
            going.stop()
            assert inbox.wait_for(lambda: inbox.errors)
            assert "shutting down" in inbox.errors[0].headers["message"]
        publish(other.address, stream, numbered("s", range(3, 6)))
        again, back = resumable(other, inbox.connected["resume-token"])
        try:
            assert back.connected["resumed"] == "true"
            assert back.connected["resume-gap"] == "true"
            assert back.wait_for(lambda: len(back.messages) == 3)
            publish(other.address, topic, numbered("t", range(3)))
            publish(other.address, stream, numbered("s", range(6, 8)))
            through(back, (other.address, topic), (other.address, stream))
            assert by_subscription(back.messages, "t") == numbered("t", range(3))
            assert by_subscription(back.messages, "s") == numbered("s", range(3, 8))
        finally:
            again.disconnect()
    finally:
        going.stop()
        other.stop()


def test_a_wrong_token_on_another_node_leaves_the_session_alone(
    pair: list[BrokerProcess],
) -> None:
    """A token no node keeps is a fresh session on B, and the real one still resumes there."""
    a, b = pair
    topic = f"/topic/anynode.wrong.{uuid.uuid4().hex[:8]}"
    first, inbox = subscribed(a, topic, "t")
    cut(first)
    wrong, fresh = resumable(b, "A" * 22)
    try:
        assert fresh.connected["resumed"] == "false"
        assert fresh.connected["resume-token"] != inbox.connected["resume-token"]
    finally:
        wrong.disconnect()
    publish(a.address, topic, numbered("m", range(3)))
    again, back = resumable(b, inbox.connected["resume-token"])
    try:
        assert back.connected["resumed"] == "true"
        assert back.wait_for(lambda: len(back.messages) == 3)
        assert back.bodies() == [body.encode() for body in numbered("m", range(3))]
    finally:
        again.disconnect()


def test_only_one_of_two_nodes_resuming_the_same_token_resumes_it(
    pair: list[BrokerProcess],
) -> None:
    """Two nodes race for one token: one says resumed:true, the other resumed:false."""
    a, b = pair
    first, inbox = subscribed(a, f"/topic/anynode.race.{uuid.uuid4().hex[:8]}", "t")
    cut(first)
    token = inbox.connected["resume-token"]
    answers: dict[str, str] = {}
    connections = []

    def resume(broker: BrokerProcess, name: str) -> None:
        connection, session = resumable(broker, token)
        connections.append(connection)
        answers[name] = session.connected["resumed"]

    racers = [threading.Thread(target=resume, args=pair_) for pair_ in ((a, "a"), (b, "b"))]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=20)
    try:
        assert sorted(answers.values()) == ["false", "true"]
    finally:
        for connection in connections:
            connection.disconnect()


def logged_in(broker: BrokerProcess, user: str, token: str = "") -> tuple[Any, Session]:
    """:returns: a resumable connection of ``user`` (password ``USER-pw``), and its listener."""
    session = Session()
    connection, _ = connect(
        broker.address,
        collector=session,
        login=user,
        passcode=f"{user}-pw",
        headers={"resume-token": token},
    )
    return connection, session


def test_another_users_token_is_refused_on_another_node_and_the_session_left_alone(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """
    With passwords: bob presenting ann's token on B gets a fresh session; ann
    then resumes on B with what she missed (the token is checked against the
    login by whichever node gets it).
    """
    users = write_users(
        tmp_path / "users", ("ann", "ann-pw", ("staff",)), ("bob", "bob-pw", ("staff",))
    )
    auth = ("--auth", f"passwd:{users}", "--data-dir", "none")
    a = node(tmp_path / "a", redis_server, *auth)
    b = node(tmp_path / "b", redis_server, *auth)
    try:
        first, inbox = logged_in(a, "ann")
        first.subscribe("/topic/anynode.users", id="t", receipt="subscribed")
        assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
        cut(first)
        token = inbox.connected["resume-token"]
        thief, stolen = logged_in(b, "bob", token)
        try:
            assert stolen.connected["resumed"] == "false"
        finally:
            thief.disconnect()
        publisher, _ = connect(b.address, login="bob", passcode="bob-pw")
        publisher.send("/topic/anynode.users", b"for ann", receipt="sent")
        publisher.disconnect(receipt="bye")
        again, back = logged_in(b, "ann", token)
        try:
            assert back.connected["resumed"] == "true"
            assert back.wait_for(lambda: back.bodies() == [b"for ann"])
        finally:
            again.disconnect()
    finally:
        a.stop()
        b.stop()
