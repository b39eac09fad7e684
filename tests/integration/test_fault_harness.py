"""
The fault harness (``python -m benchmarks faults``, docs/cluster.md "What a fault
costs") in a short form: a node SIGKILLed and Redis SIGKILLed on an AOF written
``always``, each for a second under a light steady load, and the guarantees the
table shows checked on the clients' history.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.faults.clients import History
from benchmarks.faults.cluster import ClusterOptions
from benchmarks.faults.kinds import FAULTS
from benchmarks.faults.run import Load, run_fault
from tests.support.redis import redis_server_binary

#: A second of each phase and a light load: the whole module takes about half a minute.
SHORT = Load(
    publishers=1, consumers=1, standby=1, rate=100, warmup=1.0, down=1.0, after=3.0,
    drain=15.0, linger=1.0,
)  # fmt: skip


@pytest.fixture(autouse=True)
def _redis() -> None:
    redis_server_binary()


def test_redis_killed_on_an_aof_written_always_loses_and_silently_repeats_nothing(
    tmp_path: Path,
) -> None:
    """Every receipted message arrives, a second copy only as redelivered, nobody is cut off."""
    history = History()
    result = run_fault(
        FAULTS["redis-kill-always"], SHORT, ClusterOptions(node_timeout=2.0), tmp_path, history
    )
    assert result["fsync"] == "always"
    assert result["receipted"] > 100, result
    assert result["lost"] == 0, result["lost_examples"]
    assert result["duplicates_silent"] == 0, result["silent_examples"]
    assert result["consumer_errors"] == result["consumer_disconnects"] == 0, result
    assert result["publisher_errors"] == result["publisher_disconnects"] == 0, result
    assert result["recover_s"] is not None and result["ok"]


def test_a_killed_node_loses_nothing_and_its_messages_come_back_redelivered(
    tmp_path: Path,
) -> None:
    """
    Node B SIGKILLed and started again: its consumers are cut off (they connect again,
    to A while B is down), and every receipted message is delivered.
    """
    history = History()
    result = run_fault(
        FAULTS["node-kill"], SHORT, ClusterOptions(node_timeout=2.0), tmp_path, history
    )
    assert result["receipted"] > 100, result
    assert result["lost"] == 0, result["lost_examples"]
    assert result["duplicates_silent"] == 0, result["silent_examples"]
    assert result["consumer_disconnects"] >= 1
    assert result["publisher_disconnects"] == result["publisher_errors"] == 0, result
    connects = [event for event in history.events if event.kind == "connect"]
    assert len({event.client for event in connects}) == 3
