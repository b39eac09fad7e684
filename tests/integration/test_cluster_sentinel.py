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
