"""
A real ``redis-server`` (Debian's package) on a free loopback port, for the
tests of the redis engine.

Where ``redis-server`` is missing the tests that need it are skipped, with the
reason, unless ``STOMPBROKER_REQUIRE_REDIS=1`` (set by ``.ci/run``, which
installs it): they then fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.process import BrokerProcess, free_port

REQUIRE = os.environ.get("STOMPBROKER_REQUIRE_REDIS") == "1"


def redis_server_binary() -> str:
    """
    :returns: the path of ``redis-server``.
    :raises pytest.skip.Exception: if it is missing (a failure under CI).
    """
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found is None:
        reason = "redis-server is not installed (apt-get install redis-server)"
        if REQUIRE:
            pytest.fail(f"{reason}, and STOMPBROKER_REQUIRE_REDIS=1 requires it")
        pytest.skip(reason)
    return found


class RedisServer:
    """
    ``redis-server --port FREE --save '' --appendonly yes --dir TMP`` on 127.0.0.1.

    :param directory: its data directory (the AOF lands there).
    :param password: ``requirepass``, or ``None``.
    """

    def __init__(self, directory: Path, password: str | None = None) -> None:
        self.directory = directory
        self.password = password
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        """The ``--engine`` URL of this server (with its password, if any)."""
        credentials = f":{self.password}@" if self.password else ""
        return f"redis://{credentials}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it (again, on the same port and data), and wait until it answers PING."""
        command = [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--dir", str(self.directory),
        ]
        if self.password:
            command += ["--requirepass", self.password]
        log = open(self.directory / "redis.log", "ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            if self.ping():
                return
            time.sleep(0.05)
        raise TimeoutError(f"redis-server does not answer on port {self.port}")

    def ping(self) -> bool:
        """:returns: whether the server answers (a NOAUTH error counts as an answer)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL it by its PID, as a crash would (no shutdown, no last AOF write)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """Stop it by its PID (SIGTERM; SIGKILL if it lingers)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis server of its own for a test module."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


#: The nodes' --node-timeout in the cluster tests, in seconds: short, so a dead
#: node's messages come back quickly.
NODE_TIMEOUT = "2"


def node(workdir: Path, server: RedisServer, *args: str) -> BrokerProcess:
    """Start a broker node on ``server`` with a short node timeout."""
    return BrokerProcess(
        workdir,
        "--engine",
        server.url,
        "--node-timeout",
        NODE_TIMEOUT,
        *args,
        http=None,
        reactor="uvloop",
    )


@contextmanager
def started_nodes(
    tmp_path_factory: pytest.TempPathFactory, server: RedisServer, names: str
) -> Iterator[list[BrokerProcess]]:
    """Nodes on ``server``, one per letter of ``names``, each in a directory of its own."""
    started = [node(tmp_path_factory.mktemp(name), server) for name in names]
    try:
        yield started
    finally:
        for process in started:
            process.stop()
