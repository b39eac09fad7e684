"""
A streaming query of the ``stompbroker`` data source killed mid-stream
(SIGKILL to its driver process and JVM, as a crash would) and started again
from its checkpoint, while a publisher keeps sending: the file sink holds
every message of the stream exactly once.

The query runs in a child process (``tests/sparkjobs/query_child.py``) with
a local SparkSession of its own; starting a JVM is slow, so the test kills
once and restarts once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.sparkjobs.publishing import keep_publishing
from tests.support.clients import publish
from tests.support.process import BrokerProcess, module_broker
from tests.support.spark import child_env

pytestmark = pytest.mark.integration

broker = module_broker("broker", "--data-dir", "none")

#: Longest a child may take to start its JVM and run its first batches, in seconds.
CHILD_DEADLINE = 60.0


def start_query(broker: BrokerProcess, workdir: Path) -> subprocess.Popen[str]:
    """:returns: a child running the query, in a process group of its own, once it runs."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.sparkjobs.query_child",
            f"stomp://127.0.0.1:{broker.port}",
            "/stream/crash",
            str(workdir / "out"),
            str(workdir / "checkpoint"),
        ],
        cwd=workdir,
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(workdir / "child.log").open("a"),
        text=True,
        start_new_session=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "started\n", (workdir / "child.log").read_text()
    return child


def batches(checkpoint: Path, log: str) -> list[int]:
    """:returns: the ids of the micro-batches in the checkpoint's ``offsets`` or ``commits``."""
    folder = checkpoint / log
    if not folder.exists():
        return []
    return sorted(int(name) for name in os.listdir(folder) if name.isdigit())


def wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + CHILD_DEADLINE
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_killed_query_restarted_from_its_checkpoint_loses_and_repeats_nothing(
    broker: BrokerProcess, spark: SparkSession, tmp_path: Path
) -> None:
    """
    Killed while a micro-batch is planned but not committed, the query reads
    that batch again on restart and goes on: the sink holds each offset once.
    """
    checkpoint = tmp_path / "checkpoint"
    publish(broker.address, "/stream/crash", [b"before"])
    stop = threading.Event()
    sent, publisher = keep_publishing(broker.address, "/stream/crash", stop)
    first = start_query(broker, tmp_path)
    try:
        # Kill once a batch with output is committed and the next one is planned.
        wait_for(
            lambda: (
                batches(checkpoint, "commits")
                and batches(checkpoint, "offsets")[-1] > batches(checkpoint, "commits")[-1] >= 1
            ),
            "the first query committed no batch",
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
    committed_at_kill = batches(checkpoint, "commits")[-1]
    time.sleep(0.5)  # messages arrive while no query runs
    second = start_query(broker, tmp_path)
    try:
        wait_for(
            lambda: batches(checkpoint, "commits")[-1] > committed_at_kill,
            "the restarted query committed no batch",
        )
        stop.set()
        publisher.join(10)
        assert second.stdin is not None
        second.stdin.write("stop\n")
        second.stdin.flush()
        assert second.wait(CHILD_DEADLINE) == 0, (tmp_path / "child.log").read_text()
    finally:
        stop.set()
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(10)
    expected = [b"before"] + [str(number).encode() for number in sent]
    rows = spark.read.parquet(str(tmp_path / "out")).orderBy("offset").collect()
    assert [row.offset for row in rows] == list(range(len(expected)))
    assert [row.body for row in rows] == expected
