"""
The fault harness's judgement of a history (``benchmarks/faults/verdict.py``), the
settings its faults fix (``benchmarks/faults/kinds.py``) and its command line's
refusals, without sockets: the integration test runs the faults.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cli import main
from benchmarks.errors import BenchmarkError
from benchmarks.faults.clients import Event
from benchmarks.faults.cluster import ClusterOptions, FaultCluster
from benchmarks.faults.kinds import FAULTS, fault_named
from benchmarks.faults.verdict import Timeline, judge


def history() -> list[Event]:
    """Three receipted SENDs around a fault at 10 s healed at 12 s; publishers quiet at 20 s."""
    return [
        Event(1.0, "send", "p0", "p0-0"),
        Event(1.1, "receipt", "p0", "p0-0"),
        Event(1.2, "message", "cb0", "p0-0", "m0"),
        Event(2.0, "send", "p0", "p0-1"),
        Event(2.1, "receipt", "p0", "p0-1"),
        Event(2.2, "message", "cb0", "p0-1", "m1"),
        Event(11.0, "message", "ca0", "p0-1", "m1", redelivered=True),
        Event(14.0, "message", "cb0", "p0-1", "m1"),
        Event(13.0, "send", "p0", "p0-2"),
        Event(13.5, "receipt", "p0", "p0-2"),
        Event(13.0, "send", "p0", "p0-3"),
        Event(13.2, "error", "p0", "p0-3", "message not stored"),
        Event(13.3, "disconnect", "p0"),
        Event(15.0, "message", "ca0", "p0-3", "m3"),
        Event(9.0, "disconnect", "cb1"),
    ]


def test_judge_counts_losses_and_splits_duplicates_by_redelivered() -> None:
    result = judge(history(), Timeline(fault=10.0, healed=12.0, quiet=20.0))
    assert (result["sent"], result["receipted"], result["refused"]) == (4, 3, 1)
    assert result["lost"] == 1 and result["lost_examples"] == ["p0-2"]
    assert result["duplicates_redelivered"] == 1
    assert result["duplicates_silent"] == 1
    assert result["silent_examples"][0]["seq"] == "p0-1"
    assert (result["publisher_errors"], result["publisher_disconnects"]) == (1, 1)
    assert (result["consumer_errors"], result["consumer_disconnects"]) == (0, 1)
    assert result["error_messages"] == {"message not stored": 1}
    # The first delivery of a message sent after the heal (p0-3, at 15 s).
    assert result["recover_s"] == 3.0
    # B's consumers: nothing from the fault (10) to 14, then nothing until the quiet (20).
    assert result["gap_s"] == 6.0
    # Everyone: 10 -> 11 -> 14 -> 15 -> 20.
    assert result["stall_s"] == 5.0
    assert result["worst_s"] == 0.2
    assert result["ok"] is False


def test_a_clean_history_is_ok() -> None:
    events = [e for e in history() if e.seq not in ("p0-1", "p0-2")]
    assert judge(events, Timeline(10.0, 12.0, 20.0))["ok"] is True


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["faults", "no-such-fault"], "faults are node-kill"),
        (["faults", "--repeat", "0"], "must be positive"),
        (["faults", "--fsync", "no"], "invalid choice"),
        (["faults", "sentinel-failover"], "sentinel-failover-wait0"),
    ],
)
def test_bad_options_are_refused_with_the_reason(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert complaint in capsys.readouterr().err


def test_each_sentinel_fault_runs_on_the_sentinel_layout_with_and_without_the_wait() -> None:
    run = ClusterOptions(fsync="always", node_args=("--x",))
    settings = {
        name: (fault.layout, fault.options(run).wait_replicas)
        for name, fault in FAULTS.items()
        if name.startswith("sentinel-")
    }
    assert settings == {
        "sentinel-failover-wait0": ("sentinel", 0),
        "sentinel-failover-wait1": ("sentinel", 1),
        "sentinel-kill-primary-wait0": ("sentinel", 0),
        "sentinel-kill-primary-wait1": ("sentinel", 1),
    }
    # What the fault does not fix stays the run's.
    fixed = fault_named("sentinel-kill-primary-wait1").options(run)
    assert (fixed.fsync, fixed.node_args) == ("always", ("--x",))


def test_a_fault_that_fixes_appendfsync_keeps_the_runs_replica_wait() -> None:
    fixed = fault_named("redis-kill-always").options(ClusterOptions(wait_replicas=2))
    assert (fixed.fsync, fixed.wait_replicas) == ("always", 2)


def test_an_unknown_layout_is_refused_before_anything_starts(tmp_path: Path) -> None:
    cluster = FaultCluster(tmp_path, ClusterOptions(), "mesh")
    with pytest.raises(BenchmarkError, match="layouts are direct, proxied, sentinel"):
        cluster.start()
    assert cluster.redis is None and cluster.sentinels is None and not cluster.nodes
