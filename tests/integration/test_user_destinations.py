"""
User destinations end to end (docs/destinations.md, "User destinations"):
``stomp.py`` clients on a real ``twistd`` broker, and on two nodes sharing a
real ``redis-server``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.clients import Collector, connect, flush_deliveries, through
from tests.support.passwords import secured_module, write_users
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, node, redis_server  # noqa: F401

pytestmark = pytest.mark.integration

USERS = (("alice", "pw", ()), ("bob", "pw", ()), ("backend", "pw", ()))
ACCESS = """
[users.backend]
write = ["/user/#", "/topic/marker.#"]

[groups.everyone]
members = ["alice", "bob", "backend"]
read = ["/topic/marker.#"]
write = ["/topic/marker.#"]
"""

secured = secured_module(ACCESS, *USERS)


def subscribed(address: tuple[str, int], login: str, destination: str) -> tuple[object, Collector]:
    """:returns: a session of ``login`` subscribed to ``destination``, its RECEIPT in."""
    connection, inbox = connect(address, login=login, passcode="pw")
    connection.subscribe(destination, id="s", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    return connection, inbox


def name() -> str:
    return f"news{uuid.uuid4().hex[:8]}"


def test_every_session_of_the_user_gets_it_and_another_user_does_not(
    secured: BrokerProcess,
) -> None:
    """Two sessions of alice get the backend's SEND to /user/alice/queue/NAME; bob's does not."""
    queue = name()
    sessions = [
        subscribed(secured.address, login, f"/user/queue/{queue}")
        for login in ("alice", "alice", "bob")
    ]
    backend, _ = connect(secured.address, login="backend", passcode="pw")
    backend.send(f"/user/alice/queue/{queue}", b"for alice")
    for _, inbox in sessions[:2]:
        through(inbox, (backend, f"/user/alice/queue/{queue}"))
        [message] = inbox.messages
        assert message.body == b"for alice"
        assert message.headers["destination"] == f"/user/queue/{queue}"
    bob, bob_inbox = sessions[2]
    flush_deliveries(bob, bob_inbox, sender=backend)
    assert bob_inbox.messages == []
    for connection, _ in sessions:
        connection.disconnect()  # type: ignore[attr-defined]
    backend.disconnect()


def test_a_user_may_not_send_to_another_user_without_the_write_right(
    secured: BrokerProcess,
) -> None:
    """alice has no write right on bob's user destinations: an ERROR, and nothing for bob."""
    alice, inbox = connect(secured.address, login="alice", passcode="pw")
    alice.send("/user/bob/queue/x", b"no")
    assert inbox.wait_for(lambda: inbox.errors)
    assert (
        inbox.errors[0].headers["message"] == "access denied: no write right on '/user/bob/queue/x'"
    )


@pytest.fixture(scope="module")
def two_nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Nodes A and B on one Redis server, logging the users in from one password file."""
    users = write_users(tmp_path_factory.mktemp("users") / "users.txt", *USERS)
    started = [
        node(tmp_path_factory.mktemp(letter), redis_server, "--auth", f"passwd:{users}")
        for letter in "ab"
    ]
    try:
        yield started
    finally:
        for process in started:
            process.stop()


def test_a_send_on_one_node_reaches_the_users_sessions_on_every_node(
    two_nodes: list[BrokerProcess],
) -> None:
    """alice on A and on B get the SEND made on A; bob on B does not."""
    a, b = two_nodes
    queue = name()
    alice_a = subscribed(a.address, "alice", f"/user/topic/{queue}")
    alice_b = subscribed(b.address, "alice", f"/user/topic/{queue}")
    bob_b = subscribed(b.address, "bob", f"/user/topic/{queue}")
    backend, _ = connect(a.address, login="backend", passcode="pw")
    for body in (b"1", b"2"):
        backend.send(f"/user/alice/topic/{queue}", body)
    for _, inbox in (alice_a, alice_b):
        through(inbox, (backend, f"/user/alice/topic/{queue}"), timeout=10)
        assert inbox.bodies() == [b"1", b"2"]
        assert {m.headers["destination"] for m in inbox.messages} == {f"/user/topic/{queue}"}
    bob, bob_inbox = bob_b
    flush_deliveries(bob, bob_inbox, sender=backend, timeout=10)
    assert bob_inbox.messages == []
    for connection, _ in (alice_a, alice_b, bob_b):
        connection.disconnect()  # type: ignore[attr-defined]
    backend.disconnect()


def test_nodes_keep_no_user_destination_once_its_sessions_are_gone(
    two_nodes: list[BrokerProcess],
) -> None:
    """A SEND to a user who unsubscribed everywhere reaches nobody, and the sender goes on."""
    a, b = two_nodes
    queue = name()
    connection, inbox = subscribed(b.address, "alice", f"/user/queue/{queue}")
    connection.unsubscribe("s")  # type: ignore[attr-defined]
    backend, backend_inbox = connect(a.address, login="backend", passcode="pw")
    backend.send(f"/user/alice/queue/{queue}", b"gone", receipt="sent")
    assert backend_inbox.wait_for(lambda: "sent" in backend_inbox.receipts)
    flush_deliveries(connection, inbox, sender=backend, timeout=10)
    assert inbox.messages == [] and backend_inbox.errors == []
    connection.disconnect()  # type: ignore[attr-defined]
    backend.disconnect()
