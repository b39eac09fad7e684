"""
The crash test of issue 5, small: persistent messages flow through the real
broker (``twistd -n stompbroker --data-dir ...``) between ``stomp.py`` producers
that wait for receipts and consumers that ACK with receipts; the broker is
killed with SIGKILL at a random moment, started again on the same data
directory, and fresh consumers drain the queue.

The round itself, and the rules it checks, are :mod:`benchmarks.crash`, which
runs the same round at scale (``python -m benchmarks.crash``).
"""

from __future__ import annotations

import random
from pathlib import Path

from attrs import define

from benchmarks.crash import Shape, run_round
from tests.integration.broker_process import BrokerProcess


@define
class Starter:
    """Starts brokers for the round with the test harness, each in a directory of its own."""

    workdir: Path
    starts: int = 0

    def __call__(self, data_dir: Path) -> KillableBroker:
        self.starts += 1
        place = self.workdir / f"broker-{self.starts}"
        place.mkdir()
        return KillableBroker(BrokerProcess(place, "--data-dir", str(data_dir), http=None))


@define
class KillableBroker:
    process: BrokerProcess

    @property
    def address(self) -> tuple[str, int]:
        return self.process.address

    def kill(self) -> None:
        self.process.process.kill()
        self.process.process.wait(timeout=10)

    def stop(self) -> None:
        self.process.stop()


def test_no_acknowledged_message_is_lost_to_sigkill(tmp_path: Path) -> None:
    """
    Issue 5: every message whose receipt arrived is delivered at least once after
    a SIGKILL and a restart, and the only duplicates are messages delivered but not
    yet acknowledged at the kill, which come back with redelivered:true.
    """
    seed = random.randrange(1 << 30)
    report = run_round(
        Starter(tmp_path),
        tmp_path / "data",
        Shape(producers=2, consumers=2, seconds=2.0, size=1024, window=20),
        seed,
    )
    assert report.receipted > 0 and report.delivered_before > 0, report
    assert report.ok, report
