"""
The state that decides a shared queue's consumer is the cluster's, not a node's
(docs/design/cluster.md, "Selectors, consumer priorities, exclusive consumers and
message groups"): a real ``redis-server`` and two ``twistd`` nodes, each
outcome compared with what one node gives.

- ``x-single-active-consumer`` is one declaration per queue, shared by the
  nodes, and each node's consumers follow it, whatever headers later
  SUBSCRIBEs on other nodes carry.
- A message group whose owning consumer leaves goes to the consumer one
  node's round-robin picks, on whichever node it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from tests.support.clients import Collector, connect, publish, through
from tests.support.process import BrokerProcess
from tests.support.redis import (  # noqa: F401
    NODE_TIMEOUT,
    RedisServer,
    one_node,
    redis_server,
    started_nodes,
    two_nodes,
    unique,
)

pytestmark = pytest.mark.integration

SINGLE_ACTIVE = "x-single-active-consumer"

#: Seconds a test waits for what the nodes owe it: generous, for a loaded machine.
WAIT = 15.0


def registry_barrier(server: RedisServer, queue: str) -> Callable[[int], None]:
    """:returns: a wait until ``count`` consumers of ``queue`` are in the shared registry."""

    def wait(count: int) -> None:
        client = redis.Redis(port=server.port)
        deadline = time.monotonic() + WAIT
        try:
            while client.hlen(f"stompbroker:{{q:{queue}}}:consumers") != count:
                assert time.monotonic() < deadline, "the registry never had the consumers"
                time.sleep(0.02)
        finally:
            client.close()

    return wait


def subscribe(
    address: tuple[str, int], queue: str, name: str, ack: str = "auto", **headers: str
) -> tuple[Any, Collector]:
    """A consumer of ``queue`` whose SUBSCRIBE the broker has handled (its receipt came)."""
    connection, inbox = connect(address)
    connection.subscribe(queue, id=name, ack=ack, headers=headers, receipt=f"on-{name}")
    assert inbox.wait_for(lambda: f"on-{name}" in inbox.receipts, WAIT)
    return connection, inbox


# -- x-single-active-consumer --------------------------------------------------------


def test_a_later_true_declaration_on_another_node_is_ignored_as_on_one_node(
    nodes: list[BrokerProcess],
    one_node: BrokerProcess,  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    The first consumer (A, a window of one it never acknowledges) declares
    nothing; one on B says true, with a plain one beside it: the queue is not
    single-active, so the two on B share what A cannot take, as on one node.
    """
    a, b = nodes
    for where, barrier, (first, second) in (
        ("one node", lambda count: None, (one_node.address, one_node.address)),
        ("cluster", None, (a.address, b.address)),
    ):
        queue = unique("/queue/sac.later.")
        wait = barrier or registry_barrier(redis_server, queue)
        plain, plain_got = subscribe(
            first, queue, "first", "client-individual", **{"prefetch-count": "1"}
        )
        wait(1)
        declaring, declaring_got = subscribe(second, queue, "declaring", **{SINGLE_ACTIVE: "true"})
        beside, beside_got = subscribe(second, queue, "beside")
        wait(3)
        publish(first, queue, [str(n).encode() for n in range(30)])
        inboxes = (plain_got, declaring_got, beside_got)
        assert plain_got.wait_for(
            lambda inboxes=inboxes: sum(len(i.messages) for i in inboxes) == 30,  # type: ignore[misc]
            WAIT,
        ), where
        assert len(plain_got.messages) == 1, where
        assert declaring_got.messages and beside_got.messages, (
            where,
            [inbox.bodies() for inbox in inboxes],
        )
        for connection in (plain, declaring, beside):
            connection.disconnect()


def test_the_shared_declaration_holds_on_every_node_and_survives_the_active_node(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """
    A declares the queue single-active; on B a consumer says false (a conflicting
    declaration, ignored as on one node) and a plain one subscribes after it.
    The active consumer on A gets every message; A is SIGKILLed: the earliest
    standby on B alone takes over, with what A held redelivered.
    """
    queue = unique("/queue/sac.kill.")
    wait = registry_barrier(redis_server, queue)
    with started_nodes(tmp_path_factory, redis_server, "ab") as (a, b):
        active, active_got = connect(a.address)
        active.subscribe(queue, id="a", ack="client-individual", headers={SINGLE_ACTIVE: "true"})
        wait(1)
        conflicting, conflicting_got = subscribe(b.address, queue, "c", **{SINGLE_ACTIVE: "false"})
        wait(2)
        later, later_got = subscribe(b.address, queue, "l")
        wait(3)
        publish(b.address, queue, [b"1", b"2", b"3"])
        assert active_got.wait_for(lambda: active_got.bodies() == [b"1", b"2", b"3"], WAIT)
        assert conflicting_got.messages == [] and later_got.messages == []
        a.process.kill()
        a.process.wait(timeout=10)
        publish(b.address, queue, [b"4", b"5"])
        assert conflicting_got.wait_for(
            lambda: sorted(conflicting_got.bodies()) == [b"1", b"2", b"3", b"4", b"5"],
            timeout=3 * float(NODE_TIMEOUT) + WAIT,
        ), (conflicting_got.bodies(), later_got.bodies())
        through(conflicting_got, (b.address, queue), timeout=WAIT)
        assert later_got.messages == []
        redelivered = {m.body for m in conflicting_got.messages if m.headers.get("redelivered")}
        assert redelivered == {b"1", b"2", b"3"}
        conflicting.disconnect()
        later.disconnect()


def test_the_declaration_stands_while_the_queue_holds_messages(
    nodes: list[BrokerProcess],
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    Every consumer of a single-active queue leaves while messages wait: the next
    first consumers (on the other node, declaring nothing) still find it
    single-active, as on one node.
    """
    a, b = nodes
    queue = unique("/queue/sac.stands.")
    wait = registry_barrier(redis_server, queue)
    declaring, _ = subscribe(a.address, queue, "d", **{SINGLE_ACTIVE: "true"})
    wait(1)
    declaring.disconnect()
    wait(0)
    publish(a.address, queue, [str(n).encode() for n in range(10)])
    first, first_got = subscribe(b.address, queue, "f")
    second, second_got = subscribe(b.address, queue, "s")
    wait(2)
    assert first_got.wait_for(lambda: len(first_got.messages) == 10, WAIT), first_got.bodies()
    through(first_got, (a.address, queue), timeout=WAIT)
    assert second_got.messages == []
    first.disconnect()
    second.disconnect()


# -- message groups ----------------------------------------------------------------


def regroup(
    queue: str,
    owner_address: tuple[str, int],
    heir_address: tuple[str, int],
    other_address: tuple[str, int],
    wait: Callable[[int], None],
) -> dict[str, str]:
    """
    Ten groups owned by one consumer, which leaves while another on its broker and
    a third elsewhere consume: :returns: which of the two each group went to.
    """
    groups = [f"g{n}" for n in range(10)]
    owner, owned = subscribe(owner_address, queue, "owner")
    wait(1)
    for group in groups:
        publish(owner_address, queue, [f"{group}:0".encode()], JMSXGroupID=group)
    assert owned.wait_for(lambda: len(owned.messages) == 10, WAIT), owned.bodies()
    heir, heir_got = subscribe(heir_address, queue, "heir")
    wait(2)
    other, other_got = subscribe(other_address, queue, "other")
    wait(3)
    owner.unsubscribe("owner", receipt="off")
    assert owned.wait_for(lambda: "off" in owned.receipts, WAIT)
    wait(2)
    sender, sent = connect(owner_address)
    for round_ in (1, 2):
        for group in groups:
            sender.send(queue, f"{group}:{round_}".encode(), headers={"JMSXGroupID": group})
    sender.send(queue, b"end", receipt="done")
    assert sent.wait_for(lambda: "done" in sent.receipts, WAIT)
    inboxes = {"heir": heir_got, "other": other_got}
    assert heir_got.wait_for(
        lambda: sum(len(inbox.messages) for inbox in inboxes.values()) == 21, WAIT
    ), {name: inbox.bodies() for name, inbox in inboxes.items()}
    went: dict[str, str] = {}
    for name, inbox in inboxes.items():
        for message in inbox.messages:
            if message.body == b"end":
                continue
            group, round_ = message.body.decode().split(":")
            assert went.setdefault(group, name) == name, f"{group} went to two consumers"
            first = message.headers.get("JMSXGroupFirstForConsumer") == "true"
            assert first == (round_ == "1"), (name, message.body, message.headers)
    for connection in (owner, heir, other, sender):
        connection.disconnect()
    return went


def test_groups_whose_owner_left_go_where_one_nodes_round_robin_sends_them(
    nodes: list[BrokerProcess],
    one_node: BrokerProcess,  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """
    The owner (on A) of ten groups unsubscribes while A has another consumer and
    B has one: the groups alternate between the two, first-for-consumer on
    their first message there, exactly as on one node.
    """
    a, b = nodes
    alone = one_node.address
    on_one_node = regroup(unique("/queue/regroup."), alone, alone, alone, lambda count: None)
    assert on_one_node == {f"g{n}": ("heir", "other")[n % 2] for n in range(10)}
    queue = unique("/queue/regroup.")
    wait = registry_barrier(redis_server, queue)
    assert regroup(queue, a.address, a.address, b.address, wait) == on_one_node
