"""
A per-destination policy's ``slow-consumer`` and ``slow-consumer-buffer``
against a real ``twistd`` broker: a subscriber to a topic under the policy that
stops reading gets the policy's (``drop-oldest`` past 256 KiB), not the
listener's ``--slow-consumer disconnect`` past 8 MiB (docs/policies.md).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.process import BrokerProcess
from tests.support.slow_consumers import stall_and_flood


def test_a_topic_policy_sets_the_slow_consumer_policy_and_buffer(tmp_path: Path) -> None:
    with BrokerProcess(
        tmp_path,
        "--slow-consumer",
        "disconnect",
        "--slow-consumer-buffer",
        "8M",
        "--policy",
        "feeds:pattern=feeds.>,apply-to=topics,slow-consumer=drop-oldest,"
        "slow-consumer-buffer=262144",
        "--heartbeat",
        "0,0",
        http=None,
    ) as broker:
        operator, advisories, stalled, publisher = stall_and_flood(
            broker.address, "/topic/feeds.flood"
        )

        assert advisories.wait_for(lambda: len(advisories.messages) >= 1, timeout=10)
        seen = advisories.messages[0].headers
        assert seen["stompbroker-policy"] == "drop-oldest"
        assert seen["stompbroker-buffer"] == "262144"

        # Dropped down to the policy's buffer, not disconnected.
        frames = stalled.read_frames(count=30000, timeout=3)
        assert all(frame.command == "MESSAGE" for frame in frames)
        assert 0 < len(frames) - 1 < 20000
        assert not stalled.closed_by_peer(timeout=0.5)
        for client in (stalled, publisher):
            client.close()
        operator.disconnect()
