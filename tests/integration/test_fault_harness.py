"""
The fault harness (``python -m benchmarks faults``, docs/cluster.md "What a fault
costs") in a short form: a node SIGKILLed, a node SIGSTOPped past
``--node-timeout``, Redis SIGKILLed on an AOF written ``always``, and ten
seconds of overload, under a light steady load, and the guarantees the table
shows checked on the clients' history.
"""

from __future__ import annotations

from pathlib import Path

import attrs
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


def test_a_node_stopped_past_its_timeout_delivers_no_copy_without_redelivered(
    tmp_path: Path,
) -> None:
    """
    Node B SIGSTOPped for twice ``--node-timeout``: node A takes over what B held
    and delivers it ``redelivered:true``; B, woken, hands out none of it again
    (it notices its lapse and keeps only what its pending list still names), and
    its consumers keep their connections.
    """
    history = History()
    result = run_fault(
        FAULTS["node-stop"], SHORT, ClusterOptions(node_timeout=2.0), tmp_path, history
    )
    assert result["held_s"] >= 4.0
    assert result["receipted"] > 100, result
    assert result["lost"] == 0, result["lost_examples"]
    assert result["duplicates_silent"] == 0, result["silent_examples"]
    assert result["consumer_errors"] == result["consumer_disconnects"] == 0, result
    assert result["publisher_errors"] == result["publisher_disconnects"] == 0, result
    assert result["ok"]


def test_overload_is_back_pressure_never_an_error(tmp_path: Path) -> None:
    """
    Ten seconds of pipelining producers past what the cluster carries (the harness's
    ``overload`` runs a minute): nobody gets an ERROR or is cut off, every receipted
    message of the steady load arrives, the flood's messages flow, and node A's memory
    stays bounded.
    """
    history = History()
    fault = attrs.evolve(FAULTS["overload"], seconds=10.0)
    result = run_fault(fault, SHORT, ClusterOptions(node_timeout=2.0), tmp_path, history)
    assert result["receipted"] > 100, result
    assert result["lost"] == 0, result["lost_examples"]
    assert result["duplicates_silent"] == 0, result["silent_examples"]
    assert result["consumer_errors"] == result["consumer_disconnects"] == 0, result
    assert result["publisher_errors"] == result["publisher_disconnects"] == 0, result
    assert result["flood_sent"] > 0 and result["flood_delivered"] > 0, result
    assert result["node_a_rss_kb_peak"] < result["node_a_rss_kb_first"] + 200_000, result
    assert result["ok"]
