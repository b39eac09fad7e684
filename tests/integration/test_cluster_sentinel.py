"""
Failover by itself (docs/cluster.md, "Replica and Sentinel"): nodes started with a
``redis+sentinel://`` URL find the primary through three real Sentinels, follow a
``SENTINEL FAILOVER`` and a SIGKILL of the primary without a restart, hold their
publishers meanwhile, and keep their consumers connected.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.redis import (
    AckingCollector,
    RedisServer,
    SentinelGroup,
    SteadyPublisher,
    drain,
    flowing,
    node,
    steady_load,
)

pytestmark = pytest.mark.integration


def _run(
    tmp_path: Path, *options: str, kill: bool
) -> tuple[SteadyPublisher, AckingCollector, set[bytes]]:
    """
    Two nodes on a Sentinel group, a steady receipted persistent load from node A to a
    consumer on node B, a ``SENTINEL FAILOVER`` (and with ``kill`` a SIGKILL of the new
    primary); :returns: the publisher, the consumer, and the bodies receipted after the
    last failover was complete.
    """
    group = SentinelGroup(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = node(tmp_path / "a", group, *options)
    b = node(tmp_path / "b", group, *options)
    try:
        with steady_load(a, b) as (publisher, inbox):
            assert flowing(inbox)
            first = group.primary_port()
            second = group.failover()
            assert second != first
            assert flowing(inbox)
            if kill:
                group.servers[second].kill()
                assert group.wait_for_new_primary(second) == first
                assert flowing(inbox)
            after = publisher.receipted()
            # Barrier: messages sent and receipted on the new primary (the inbox may
            # still be taking older ones while the publisher waits for receipts).
            assert publisher.events.wait_for(
                lambda: len(publisher.receipted() - after) >= 50, timeout=30
            )
            assert flowing(inbox)
            receipted = drain(publisher, inbox, wait=10)
        return publisher, inbox, receipted - after
    finally:
        a.stop()
        b.stop()
        group.stop()


def test_nodes_follow_a_failover_and_a_killed_primary(tmp_path: Path) -> None:
    """
    Without the replica wait, nodes follow both failovers without a restart: no ERROR,
    no consumer cut off, every message receipted once the new primary was in place is
    delivered (what the replica had not received before a failover may be lost: counted).
    """
    publisher, inbox, later = _run(tmp_path, kill=True)
    delivered = set(inbox.bodies())
    assert later and later <= delivered
    lost = publisher.receipted() - delivered
    print(f"receipted {len(publisher.receipted())}, lost in the failovers {len(lost)}")


def test_nodes_write_to_the_new_primary_as_soon_as_the_sentinels_switch(tmp_path: Path) -> None:
    """
    On ``+switch-master`` every node drops its connections to the old primary: within
    about 2 s of ``SENTINEL FAILOVER`` the nodes add the queue's entries on the new
    primary, and none on the old one from then on (it would lose them when the
    Sentinels make it a replica); no client is cut off, nothing receipted is lost.
    """
    group = SentinelGroup(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = node(tmp_path / "a", group)
    b = node(tmp_path / "b", group)
    try:
        with steady_load(a, b) as (publisher, inbox):
            assert flowing(inbox)
            key = f"stompbroker:{{q:{publisher.queue}}}"
            old = group.primary_port()
            new = group.failover()
            promoted = time.monotonic()
            before = group.entries_added(new, key)
            group.wait_until(lambda: group.entries_added(new, key) > before, timeout=10)
            followed = time.monotonic() - promoted
            # Whatever the nodes still had on its way to the old primary has landed.
            time.sleep(0.5)
            left = group.entries_added(old, key)
            assert flowing(inbox)
            assert group.entries_added(old, key) == left
            receipted = drain(publisher, inbox, wait=10)
            assert receipted <= set(inbox.bodies())
            print(f"writes on the new primary {followed:.2f} s after it was promoted")
            assert followed < 2.5
    finally:
        a.stop()
        b.stop()
        group.stop()


def test_with_the_replica_wait_a_failover_holds_publishers_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """
    With ``--engine-wait-replicas 1``, a failover holds the RECEIPTs (and the
    publishers) until the new primary's replica has the messages, rather than an
    ERROR ``message not replicated`` that closes the publisher: no ERROR, nobody cut
    off, every receipted message delivered, any second copy marked ``redelivered``.
    """
    group = SentinelGroup(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = node(tmp_path / "a", group, "--engine-wait-replicas", "1")
    b = node(tmp_path / "b", group, "--engine-wait-replicas", "1")
    try:
        with steady_load(a, b) as (publisher, inbox):
            assert flowing(inbox)
            group.failover()
            # The new primary has a replica again once the old one is reconfigured
            # and synchronised (about 10 s, the Sentinels' poll): receipts come again.
            assert flowing(inbox, timeout=30)
            receipted = drain(publisher, inbox, wait=10)
            assert receipted <= set(inbox.bodies())
            copies = len(inbox.messages) - len(set(inbox.bodies()))
            print(f"receipted {len(receipted)}, second copies (all redelivered) {copies}")
    finally:
        a.stop()
        b.stop()
        group.stop()


def test_a_primary_turned_replica_is_an_outage_not_an_error(tmp_path: Path) -> None:
    """
    With a plain ``redis://`` URL, the server becoming a replica (``READONLY`` answers)
    counts as the primary having moved: the nodes reconnect and hold their publishers and
    receipts, nobody gets an ERROR, and once it is a primary again everything receipted
    is delivered.
    """
    import redis

    primary_dir, other_dir = tmp_path / "primary", tmp_path / "other"
    primary_dir.mkdir()
    other_dir.mkdir()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    primary = RedisServer(primary_dir)
    other = RedisServer(other_dir, replica_of=primary.port)
    a = node(tmp_path / "a", primary)
    b = node(tmp_path / "b", primary)
    try:
        with (
            redis.Redis(port=primary.port) as first,
            redis.Redis(port=other.port) as second,
            steady_load(a, b) as (publisher, inbox),
        ):
            assert flowing(inbox)
            # Hand the data over without losing a write: pause writes, let the other
            # server catch up, promote it, and make the primary its replica.
            first.execute_command("CLIENT", "PAUSE", 5000, "WRITE")
            offset = int(first.info("replication")["master_repl_offset"])
            SentinelGroup.wait_until(
                lambda: int(second.info("replication")["slave_repl_offset"]) >= offset
            )
            second.execute_command("REPLICAOF", "NO", "ONE")
            first.execute_command("REPLICAOF", "127.0.0.1", other.port)
            first.execute_command("CLIENT", "UNPAUSE")
            SentinelGroup.wait_until(
                lambda: first.info("replication").get("master_link_status") == "up"
            )
            time.sleep(1)
            first.execute_command("REPLICAOF", "NO", "ONE")
            assert flowing(inbox)
            receipted = drain(publisher, inbox, wait=10)
            assert receipted <= set(inbox.bodies())
    finally:
        a.stop()
        b.stop()
        other.stop()
        primary.stop()
