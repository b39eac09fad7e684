"""
Failover by itself (docs/cluster.md, "Replica and Sentinel"): nodes started with a
``redis+sentinel://`` URL find the primary through three real Sentinels, follow a
``SENTINEL FAILOVER`` and a SIGKILL of the primary without a restart, hold their
publishers meanwhile, and keep their consumers connected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.redis import (
    AckingCollector,
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


def test_with_the_replica_wait_a_failover_loses_no_receipted_message(tmp_path: Path) -> None:
    """
    With ``--engine-wait-replicas 1``, every receipted message survives a failover; while
    the new primary has no replica yet, a RECEIPT becomes ERROR ``message not replicated``
    (the publisher is told, rather than promised what a second failover could lose).
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
            # Either the load flows on the new primary, or the publisher was told.
            assert inbox.wait_for(
                lambda: publisher.events.errors or len(inbox.messages) > publisher.sent - 50,
                timeout=20,
            )
            publisher.stopping.set()
            publisher.join(timeout=10)
            receipted = publisher.receipted()
            assert inbox.wait_for(lambda: receipted <= set(inbox.bodies()), timeout=10)
            assert not inbox.disconnected and inbox.errors == []
            assert all(
                error.headers.get("message") == "message not replicated"
                for error in publisher.events.errors
            ), publisher.events.errors
            print(f"receipted {len(receipted)}, errors {len(publisher.events.errors)}")
    finally:
        a.stop()
        b.stop()
        group.stop()
