"""
The crash test of issue 5, small: persistent messages flow through the real
broker (``twistd -n stompbroker --data-dir ...``) between ``stomp.py`` producers
that wait for receipts and consumers that ACK with receipts; the broker is
killed with SIGKILL at a random moment, started again on the same data
directory, and fresh consumers drain the queue.  The moment of the kill comes
from a seed, printed, and fixed by ``STOMPBROKER_TEST_SEED`` (:mod:`tests.support.seeds`);
the report in a failure's message names it too.

The round itself, and the rules it checks, are :mod:`benchmarks.crash`, which
runs the same round at scale (``python -m benchmarks.crash``).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.crash import Shape, run_round
from tests.support.process import BrokerStarter
from tests.support.seeds import chosen_seed


def test_no_acknowledged_message_is_lost_to_sigkill(tmp_path: Path, start: BrokerStarter) -> None:
    """
    Issue 5: every message whose receipt arrived is delivered at least once after
    a SIGKILL and a restart, and the only duplicates are messages delivered but not
    yet acknowledged at the kill, which come back with redelivered:true.
    """
    seed = chosen_seed()
    report = run_round(
        start,
        tmp_path / "data",
        Shape(producers=2, consumers=2, seconds=2.0, size=1024, window=20),
        seed,
    )
    assert report.receipted > 0 and report.delivered_before > 0, report
    assert report.ok, report
