"""
``python -m sparkjobs.live --broker``, run as an operator runs it: a child
process following a real broker's statistics stream, stopped with SIGTERM.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.process import BrokerProcess, module_broker
from tests.support.spark import child_env

pytestmark = pytest.mark.integration

broker = module_broker(
    "broker",
    "--stats-stream",
    "/stream/stompbroker.stats",
    "--stats-interval",
    "1",
    "--data-dir",
    "none",
)
#: Longest the child may take to start its JVM and commit its first batches, in seconds.
CHILD_DEADLINE = 120.0
TABLES = ("destination_per_minute", "broker_per_minute", "bad_records")


def test_sigterm_stops_the_live_job_cleanly(broker: BrokerProcess, tmp_path: Path) -> None:
    """Once each query has committed a batch, SIGTERM ends the job with status 0 and no stack."""
    log = tmp_path / "live.log"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparkjobs.live",
            "--broker",
            f"stomp://127.0.0.1:{broker.port}",
            "--output",
            str(tmp_path / "out"),
            "--checkpoint",
            str(tmp_path / "checkpoint"),
            "--master",
            "local[1]",
            "--state-partitions",
            "1",
        ],
        cwd=tmp_path,
        env=child_env(),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + CHILD_DEADLINE
        commits = [tmp_path / "checkpoint" / table / "commits" / "1" for table in TABLES]
        while not all(commit.exists() for commit in commits):
            assert child.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        child.send_signal(signal.SIGTERM)
        assert child.wait(CHILD_DEADLINE) == 0, log.read_text()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    said = log.read_text()
    for sign in ("Traceback", " ERROR ", "Aborting job", "cancelled"):
        assert sign not in said, said
