"""
The slow-consumer advisory against a real ``twistd`` broker: a subscriber that
stops reading is warned on its subscription before its policy drops anything,
and an operator subscribed to the advisory topic sees the same.
"""

from __future__ import annotations

from tests.support.process import BrokerProcess
from tests.support.slow_consumers import stall_and_flood


def test_a_stalled_subscriber_and_the_operators_are_warned_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The stalled client finds one advisory ahead of its messages; the operator gets it too."""
    with BrokerProcess(
        tmp_path,
        "--slow-consumer",
        "drop-oldest",
        "--slow-consumer-buffer",
        "256K",
        "--heartbeat",
        "0,0",
        http=None,
    ) as broker:
        operator, advisories, stalled, publisher = stall_and_flood(broker.address, "/topic/flood")

        assert advisories.wait_for(lambda: len(advisories.messages) >= 1, timeout=10)
        seen = advisories.messages[0].headers
        assert seen["stompbroker-advisory"] == "slow-consumer"
        assert seen["stompbroker-policy"] == "drop-oldest"
        assert seen["subscription-destination"] == "/topic/flood"
        assert int(seen["stompbroker-bytes-waiting"]) > 128 * 1024

        frames = stalled.read_frames(count=30000, timeout=3)
        warned = [f for f in frames if f.get("stompbroker-advisory") == "slow-consumer"]
        assert len(warned) == 1
        assert warned[0].get("subscription") == "0"
        assert warned[0].get("stompbroker-policy") == "drop-oldest"
        assert 0 < len(frames) - 1 < 20000
        for client in (stalled, publisher):
            client.close()
        operator.disconnect()
