"""
The brokers of the cluster scenarios: a ``redis-server`` and two stompbroker
nodes on it (``--engine redis://...``), publishers connecting to node A and
receivers to node B, so that every message crosses Redis.

- ``cluster-fanout``: one publisher on A, N topic subscribers on B (the issue's
  1 -> 10): every delivery is a message A published to Redis and B fanned out;
- ``cluster-queue``: producers on A, consumers on B: every message is an
  ``XADD`` by A and an ``XREADGROUP``, ``XACK``/``XDEL`` by B.

The broker CPU figures are node B's (the one that delivers).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.cases import Target
from benchmarks.connection import Endpoint
from benchmarks.errors import BenchmarkError
from benchmarks.launcher import BrokerProcess, free_port

__all__ = ["RedisServer", "answers_ping", "cluster_target"]

#: Seconds redis-server may take to answer PING, and to stop.
REDIS_TIMEOUT = 10.0


def answers_ping(port: int) -> bool:
    """:returns: whether a Redis on 127.0.0.1:``port`` answers PING (not while it loads)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """
    ``redis-server`` on a free loopback port, without persistence (the
    scenarios measure the path through Redis, not its disk), stopped by its pid.

    :param directory: its working directory, where it logs.
    :raises BenchmarkError: if ``redis-server`` is not installed or does not start.
    """

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise BenchmarkError(
                "the cluster scenarios need redis-server (apt-get install redis-server)"
            )
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self._log = open(directory / "redis.log", "wb")
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + REDIS_TIMEOUT
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BenchmarkError(f"redis-server did not start; see {directory / 'redis.log'}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        """Its ``--engine`` URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    def _answers(self) -> bool:
        return answers_ping(self.port)

    def stop(self) -> None:
        """Stop it with SIGTERM, or SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=REDIS_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=REDIS_TIMEOUT)
        self._log.close()


@contextlib.contextmanager
def cluster_target(
    workdir: Path, broker_args: list[str], reactor: str, credentials: dict[str, Any]
) -> Iterator[Target]:
    """
    Start Redis and two nodes on it; yield them as one :class:`Target`
    (receivers on node B, publishers on node A); stop them all.

    :param broker_args: more options for both nodes.
    :param reactor: the nodes' twistd reactor (the redis engine needs uvloop or asyncio).
    :param credentials: ``login``, ``passcode`` and ``vhost`` for the endpoints.
    """
    if reactor not in ("uvloop", "asyncio"):
        reactor = "uvloop"
    with contextlib.ExitStack() as stack:
        redis = RedisServer(workdir / "redis")
        stack.callback(redis.stop)
        nodes = []
        for name in ("a", "b"):
            node = BrokerProcess(
                workdir / f"node-{name}",
                "--engine",
                redis.url,
                *broker_args,
                http=None,
                reactor=reactor,
            )
            stack.callback(node.stop)
            nodes.append(node)
        a, b = nodes
        print(
            f"# started redis-server on 127.0.0.1:{redis.port}, node A on {a.port}"
            f" (pid {a.pid}, publishers) and node B on {b.port} (pid {b.pid}, receivers)",
            file=sys.stderr,
        )
        yield Target(
            "stompbroker",
            Endpoint("127.0.0.1", b.port, None, **credentials),
            b.pid,
            publish_endpoint=Endpoint("127.0.0.1", a.port, None, **credentials),
            parts=(("node A", a.pid), ("node B", b.pid), ("redis-server", redis.process.pid)),
        )
