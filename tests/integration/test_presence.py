"""
Presence end to end (docs/destinations.md, "Presence"): ``stomp.py`` clients on
a real ``twistd`` broker, the management API's list of subscribers with and
without the read right, ``/stats`` and ``/metrics``; and two nodes sharing a real
``redis-server``, one of them killed.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import Collector, connect
from tests.support.passwords import write_users
from tests.support.process import BrokerProcess
from tests.support.redis import NODE_TIMEOUT, RedisServer, redis_server  # noqa: F401
from tests.support.resume import Session, cut

pytestmark = pytest.mark.integration

USERS = (("alice", "pw", ()), ("bob", "pw", ()), ("eve", "pw", ()))
ACCESS = """
[users.alice]
read = ["/topic/room.#"]

[users.bob]
read = ["/topic/room.#"]

[users.eve]
read = ["/topic/other.#"]
"""


def api(broker: BrokerProcess, path: str, login: str = "alice") -> tuple[int, Any]:
    """GET a management API path (or ``/stats``, ``/metrics``) as ``login``: the status and body."""
    url = f"http://127.0.0.1:{broker.http_port}{path}"
    token = base64.b64encode(f"{login}:pw".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as page:
            body = page.read()
            status = page.status
    except urllib.error.HTTPError as error:
        body, status = error.read(), error.code
    if path == "/metrics":
        return status, body.decode()
    return status, json.loads(body)


def subscribers(broker: BrokerProcess, destination: str, login: str = "alice") -> Any:
    quoted = urllib.parse.quote(destination, safe="")
    return api(broker, f"/api/destinations/{quoted}/subscribers", login)


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def events(inbox: Collector) -> list[tuple[str, str]]:
    """:returns: (kind, login) of each presence event ``inbox`` got."""
    return [
        (m.headers["stompbroker-presence"], m.headers.get("presence-login", ""))
        for m in inbox.messages
        if "stompbroker-presence" in m.headers
    ]


def subscribed(
    address: tuple[str, int], login: str, destination: str, **headers: str
) -> tuple[Any, Collector]:
    """:returns: a session of ``login`` subscribed to ``destination``, its RECEIPT in."""
    connection, inbox = connect(address, login=login, passcode="pw")
    ack = headers.pop("ack", "auto")
    connection.subscribe(destination, id="s", ack=ack, receipt="subscribed", headers=headers)
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts or bool(inbox.errors))
    return connection, inbox


def room() -> str:
    return f"/topic/room.{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with a web port, logging the users in and applying the access rules."""
    workdir = tmp_path_factory.mktemp("presence")
    users = write_users(workdir / "users.txt", *USERS)
    (workdir / "access.toml").write_text(ACCESS)
    broker = BrokerProcess(
        workdir,
        "--auth",
        f"passwd:{users}",
        "--access",
        str(workdir / "access.toml"),
        "--data-dir",
        "none",
    )
    try:
        yield broker
    finally:
        broker.stop()


def test_a_watcher_gets_joins_and_leaves_and_the_api_lists_subscribers(
    secured: BrokerProcess,
) -> None:
    destination = room()
    alice, alice_inbox = subscribed(secured.address, "alice", destination, presence="true")
    bob, _ = subscribed(secured.address, "bob", destination)
    assert alice_inbox.wait_for(lambda: events(alice_inbox) == [("join", "bob")])
    [join] = alice_inbox.messages
    assert join.headers["presence-subscribers"] == "2"
    assert join.headers["subscription"] == "s" and join.body == b""
    status, listed = subscribers(secured, destination)
    assert status == 200
    assert [(entry["login"], entry["subscription"]) for entry in listed] == [
        ("alice", "s"),
        ("bob", "s"),
    ]
    assert listed[1]["connection"] == join.headers["presence-connection"]
    assert listed[1]["node"] == join.headers["presence-node"]
    assert listed[0]["since"].endswith("Z")
    # Occupancy: /stats and /metrics.
    status, stats = api(secured, "/stats")
    assert stats["occupancy"][destination] == 2
    _, metrics = api(secured, "/metrics")
    assert f'stompbroker_destination_subscribers{{destination="{destination}"}} 2.0' in metrics
    bob.disconnect()
    assert alice_inbox.wait_for(lambda: events(alice_inbox)[-1:] == [("leave", "bob")])
    assert alice_inbox.messages[-1].headers["presence-subscribers"] == "1"
    assert [entry["login"] for entry in subscribers(secured, destination)[1]] == ["alice"]
    alice.disconnect()
    assert eventually(lambda: destination not in api(secured, "/stats")[1]["occupancy"])
    _, metrics = api(secured, "/metrics")
    assert destination not in metrics


def test_without_the_read_right_no_list_and_no_presence(secured: BrokerProcess) -> None:
    destination = room()
    alice, _ = subscribed(secured.address, "alice", destination)
    status, answer = subscribers(secured, destination, login="eve")
    assert status == 403 and "read" in answer["detail"]
    eve, inbox = subscribed(secured.address, "eve", destination, presence="true")
    assert inbox.errors
    assert inbox.errors[0].headers["message"] == f"access denied: no read right on {destination!r}"
    assert [entry["login"] for entry in subscribers(secured, destination)[1]] == ["alice"]
    alice.disconnect()


def test_a_bad_presence_header_is_an_error(secured: BrokerProcess) -> None:
    _, inbox = subscribed(secured.address, "alice", room(), presence="true", ack="client")
    assert inbox.errors[0].headers["message"] == "presence needs ack:auto"


# -- two nodes on one Redis ------------------------------------------------------------


def node(
    workdir: Path, server: RedisServer, users: Path, timeout: str = NODE_TIMEOUT
) -> BrokerProcess:
    """A node with a web port, on a prefix of this module's own."""
    return BrokerProcess(
        workdir,
        "--engine",
        f"{server.url}?prefix=presence",
        "--node-timeout",
        timeout,
        "--auth",
        f"passwd:{users}",
        reactor="uvloop",
    )


#: A node timeout no test waits for: what leaves then was not found dead.
LONG_TIMEOUT = "60"


@pytest.fixture
def two_nodes(
    redis_server: RedisServer,  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[list[BrokerProcess]]:
    """Nodes A and B; an indirect parametrize of ``two_nodes`` sets their --node-timeout."""
    timeout = getattr(request, "param", NODE_TIMEOUT)
    users = write_users(tmp_path / "users.txt", *USERS)
    started = [node(tmp_path / letter, redis_server, users, timeout) for letter in "ab"]
    try:
        yield started
    finally:
        for process in started:
            process.stop()


def test_presence_across_nodes_and_a_killed_node_leaves(two_nodes: list[BrokerProcess]) -> None:
    a, b = two_nodes
    destination = room()
    alice, alice_inbox = subscribed(a.address, "alice", destination, presence="true")
    bob, _ = subscribed(b.address, "bob", destination)
    assert alice_inbox.wait_for(lambda: events(alice_inbox) == [("join", "bob")], 10)
    b_node = alice_inbox.messages[0].headers["presence-node"]
    a_node = api(a, "/api/nodes")[1][0]["name"]
    assert b_node != a_node
    assert eventually(lambda: len(subscribers(a, destination)[1]) == 2)
    listed = subscribers(a, destination)[1]
    assert {(entry["login"], entry["node"]) for entry in listed} == {
        ("alice", a_node),
        ("bob", b_node),
    }
    assert eventually(lambda: api(b, "/stats")[1]["occupancy"].get(destination) == 2)
    bob.unsubscribe("s")
    assert alice_inbox.wait_for(lambda: events(alice_inbox)[-1:] == [("leave", "bob")], 10)
    # A node killed: its subscribers leave within --node-timeout (and a look for dead nodes).
    subscribed(b.address, "bob", destination)
    assert alice_inbox.wait_for(lambda: events(alice_inbox)[-1:] == [("join", "bob")], 10)
    killed = time.monotonic()
    b.kill()
    assert alice_inbox.wait_for(
        lambda: events(alice_inbox)[-1:] == [("leave", "bob")], float(NODE_TIMEOUT) * 3
    )
    assert time.monotonic() - killed <= float(NODE_TIMEOUT) * 1.5 + 1.0
    assert [entry["login"] for entry in subscribers(a, destination)[1]] == ["alice"]
    assert alice_inbox.messages[-1].headers["presence-subscribers"] == "1"
    alice.disconnect()


@pytest.mark.parametrize("two_nodes", [LONG_TIMEOUT], indirect=True)
def test_a_node_stopping_cleanly_takes_its_subscribers_out_at_once(
    two_nodes: list[BrokerProcess],
) -> None:
    """A node's clean stop removes its subscribers as its connections close, not at the timeout."""
    a, b = two_nodes
    destination = room()
    _, watcher = subscribed(b.address, "alice", destination, presence="true")
    subscribed(a.address, "bob", destination)
    assert watcher.wait_for(lambda: events(watcher) == [("join", "bob")], 10)
    a.stop()
    # Long before a's liveness key could expire: the stop told it, not the others' look.
    assert watcher.wait_for(lambda: events(watcher)[-1:] == [("leave", "bob")], 10)
    assert [entry["login"] for entry in subscribers(b, destination)[1]] == ["alice"]


def member_events(inbox: Collector) -> list[tuple[str, str]]:
    """:returns: (kind, member) of each member event ``inbox`` got, the member list first."""
    return [
        (m.headers["stompbroker-presence"], m.headers.get("presence-member", ""))
        for m in inbox.messages
        if "stompbroker-presence" in m.headers
    ]


def test_members_across_nodes_one_per_user_away_while_detached_and_back(
    two_nodes: list[BrokerProcess],
) -> None:
    """
    ``presence:members`` on node A: bob with a tab on each node is one member;
    his resumable session on B cut makes him away, its resume brings him back.
    """
    a, b = two_nodes
    destination = room()
    alice, watcher = subscribed(a.address, "alice", destination, presence="members")
    assert watcher.wait_for(lambda: member_events(watcher) == [("members", "")])
    assert json.loads(watcher.messages[0].body)["members"][0]["id"] == "alice"
    phone_inbox = Session()
    phone, _ = connect(
        b.address, collector=phone_inbox, login="bob", passcode="pw", headers={"resume-token": ""}
    )
    phone.subscribe(destination, id="p", ack="auto", receipt="p")
    assert phone_inbox.wait_for(lambda: "p" in phone_inbox.receipts)
    laptop, _ = subscribed(a.address, "bob", destination)
    assert watcher.wait_for(lambda: member_events(watcher)[1:] == [("join", "bob")], 10)
    assert eventually(lambda: len(subscribers(a, destination)[1]) == 3)
    laptop.disconnect()
    assert eventually(lambda: len(subscribers(a, destination)[1]) == 2)
    cut(phone)
    assert watcher.wait_for(lambda: member_events(watcher)[-1:] == [("away", "bob")], 10)
    assert json.loads(watcher.messages[-1].body)["state"] == "away"
    status, members = api(
        a, f"/api/destinations/{urllib.parse.quote(destination, safe='')}/members"
    )
    assert status == 200 and [(m["id"], m["state"]) for m in members] == [
        ("alice", "online"),
        ("bob", "away"),
    ]
    again, _ = connect(
        b.address,
        login="bob",
        passcode="pw",
        headers={"resume-token": phone_inbox.connected["resume-token"]},
    )
    assert watcher.wait_for(lambda: member_events(watcher)[-1:] == [("back", "bob")], 10)
    again.disconnect()
    assert watcher.wait_for(lambda: member_events(watcher)[-1:] == [("leave", "bob")], 10)
    assert watcher.messages[-1].headers["presence-members"] == "1"
    assert [kind for kind, _ in member_events(watcher)] == [
        "members",
        "join",
        "away",
        "back",
        "leave",
    ]
    alice.disconnect()


def call(broker: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One management API call as alice (every right: the nodes have no access file)."""
    token = base64.b64encode(b"alice:pw").decode()
    headers = {"Authorization": f"Basic {token}", "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{broker.http_port}{path}", data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as page:
            return page.status, json.loads(page.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_backend_acts_on_a_users_sessions_on_every_node(two_nodes: list[BrokerProcess]) -> None:
    """Asked on node A, bob's subscription on B ends with a notice, then his connection closes."""
    a, b = two_nodes
    destination = room()
    _, inbox = subscribed(b.address, "bob", destination)
    status, answer = call(
        a, "POST", "/api/users/bob/unsubscribe", {"destination": destination, "reason": "kicked"}
    )
    assert (status, answer["unsubscribed"]) == (200, 0)  # none on A: B ends its own
    assert inbox.wait_for(
        lambda: any("stompbroker-unsubscribed" in m.headers for m in inbox.messages), 10
    )
    [notice] = inbox.messages
    assert notice.headers["stompbroker-unsubscribed"] == "kicked"
    assert notice.headers["subscription"] == "s"
    assert eventually(lambda: subscribers(a, destination)[1] == [])
    status, answer = call(a, "DELETE", "/api/users/bob/sessions?reason=banned")
    assert status == 200 and answer["connections"] == []
    assert inbox.wait_for(lambda: bool(inbox.errors), 10)
    assert inbox.errors[0].headers["message"] == "closed by an operator"
    assert b"banned" in inbox.errors[0].body
