"""
Start stompbroker as ``twistd -n stompbroker`` on free loopback ports: the one
launcher that the benchmarks and the test suite share.

The broker runs from this checkout (first on ``PYTHONPATH``, so that it also
finds the plugin in ``twisted/plugins/``) whether or not the package is
installed, in a working directory of its own (files it keeps relative to it,
such as the default data directory of its message store, are never shared with
another broker), with its log in a file there so that its output never competes
with the caller's.  It has a web port too, unless told otherwise, so that the
WebSocket scenario and the web tests have an endpoint.

The launcher lives here rather than under ``tests/``: the benchmarks are a tool
run from a checkout (``python -m benchmarks``) and must not depend on the test
tree, while the tests already depend on the benchmarks (they run the crash round
and every scenario), so the dependency goes one way only.
``tests.support.process`` hands it to the tests.
"""

from __future__ import annotations

import functools
import itertools
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from attrs import define

from benchmarks.errors import BrokerStartFailed

ROOT = Path(__file__).resolve().parents[1]
#: Where the WebSocket endpoint of ``--http`` serves STOMP.
WEBSOCKET_PATH = "/ws"
#: The reactor every broker the benchmarks start runs on, unless told otherwise.
DEFAULT_REACTOR = "uvloop"
#: How long a broker may take to listen, in seconds.
START_TIMEOUT = 20.0
#: How long a stopping broker may take to exit before it is killed, in seconds.
STOP_TIMEOUT = 10.0
#: The ports :func:`free_port` hands out: below Linux's default ephemeral range
#: (32768-60999), from which the kernel picks the local ports of connections.
PORTS = range(20000, 32768)
#: The ``--http`` endpoint of a broker with a web port; ``{port}`` stands for a free port.
LOOPBACK_HTTP = "tcp:{port}:interface=127.0.0.1"


def twistd_command() -> list[str]:
    """:returns: the argv that runs this interpreter's ``twistd``."""
    script = Path(sys.executable).parent / "twistd"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"]


def port_block(worker: str | None, workers: int) -> range:
    """
    The share of :data:`PORTS` of one pytest-xdist worker.

    A port picked is free only until the broker binds it, a moment later: two
    workers picking from the kernel's ephemeral ports could both pick the same
    one in between, and a client's connection could take it as its local port.
    Disjoint blocks below the ephemeral range make both impossible.

    :param worker: the worker's id (``gw0``, ``gw1``, ...), ``None`` outside xdist.
    :param workers: how many workers the run has.
    :returns: the ports that worker picks from (all of :data:`PORTS` outside xdist).
    """
    if worker is None:
        return PORTS
    size = len(PORTS) // max(workers, 1)
    index = int(worker.removeprefix("gw"))
    return PORTS[index * size : (index + 1) * size]


@functools.cache
def _candidates() -> Iterator[int]:
    """
    :returns: this process's block, endlessly, from a random place (another test
        run on the machine may use the same block), one iterator per process.
    """
    block = port_block(
        os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    )
    start = secrets.randbelow(len(block))
    return (block[(start + step) % len(block)] for step in itertools.count())


def free_port() -> int:
    """
    :returns: a TCP port on 127.0.0.1 that nothing listens on right now, from this
        process's :func:`port_block`, never the one handed out just before.
    :raises BrokerStartFailed: when every port of the block is taken.
    """
    for port in itertools.islice(_candidates(), len(PORTS)):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise BrokerStartFailed("no free port on 127.0.0.1 in this process's block")


def wait_for_port(
    port: int, timeout: float = START_TIMEOUT, process: subprocess.Popen | None = None
) -> None:
    """
    Wait until something accepts connections on 127.0.0.1:``port``.

    :param process: the child expected to listen; its exit ends the wait at once.
    :raises BrokerStartFailed: when ``process`` exits, or nothing listens in time.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise BrokerStartFailed(f"the broker exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BrokerStartFailed(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


def subprocess_env() -> dict[str, str]:
    """:returns: the environment for a child that must import this checkout's code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def broker_arguments(port: int, http: str | None, reactor: str | None, *args: str) -> list[str]:
    """
    :param http: the ``--http`` endpoint, or ``None`` for no web port.
    :param reactor: twistd's ``--reactor``, or ``None`` for twistd's default.
    :param args: more options after ``stompbroker``.
    :returns: twistd's arguments for ``-n stompbroker`` on STOMP port ``port``, logging to
        stdout (after :func:`twistd_command`).
    """
    return [
        "--nodaemon",
        "--pidfile=",
        "--logfile=-",
        *([f"--reactor={reactor}"] if reactor else []),
        "stompbroker",
        "--port",
        str(port),
        "--http",
        "none" if http is None else http,
        *args,
    ]


def sigkill(process: subprocess.Popen) -> None:
    """End a child at once with SIGKILL, as a crash would, and reap it."""
    process.kill()
    process.wait(timeout=STOP_TIMEOUT)


class BrokerProcess(AbstractContextManager["BrokerProcess"]):
    """
    A ``twistd -n stompbroker`` child, listening once constructed; a context
    manager that stops it.

    :param workdir: its working directory, made if missing; its log is
        :attr:`log_path` there.
    :param args: more options after ``stompbroker``.
    :param http: the ``--http`` endpoint, with ``{port}`` standing for
        :attr:`http_port`, a free port (never the default 15674, which brokers
        running side by side would fight over); ``None`` turns the web port off.
    :param reactor: twistd's ``--reactor``; ``None`` leaves twistd's default.
    :param timeout: how long it may take to listen.
    :raises BrokerStartFailed: when it exits or does not listen in time (it is
        stopped first).

    :ivar port: its STOMP port.
    :ivar http_port: its web port, when it has one.
    :ivar ws_url: its WebSocket endpoint, or ``None`` without a web port.
    :ivar pid: its process id.
    """

    def __init__(
        self,
        workdir: Path,
        *args: str,
        http: str | None = LOOPBACK_HTTP,
        reactor: str | None = None,
        timeout: float = START_TIMEOUT,
    ) -> None:
        self.port = free_port()
        self.http_port = free_port()
        while self.http_port == self.port:
            self.http_port = free_port()
        self.ws_url = None if http is None else f"ws://127.0.0.1:{self.http_port}{WEBSOCKET_PATH}"
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "stompbroker.log"
        self._log = open(self.log_path, "wb")
        web = None if http is None else http.format(port=self.http_port)
        command = [*twistd_command(), *broker_arguments(self.port, web, reactor, *args)]
        self.process = subprocess.Popen(
            command, cwd=workdir, env=subprocess_env(), stdout=self._log, stderr=subprocess.STDOUT
        )
        self.pid = self.process.pid
        try:
            for port in [self.port] if http is None else [self.port, self.http_port]:
                wait_for_port(port, timeout, self.process)
        except BaseException as failure:
            failure.add_note(f"the broker's log: {self.log_path}")
            self.stop()
            raise

    @property
    def address(self) -> tuple[str, int]:
        """Where its STOMP port listens."""
        return ("127.0.0.1", self.port)

    def log(self) -> str:
        """:returns: what it has logged so far."""
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """End it at once with SIGKILL, as a crash would."""
        sigkill(self.process)
        self._log.close()

    def stop(self) -> None:
        """Stop it with SIGTERM, or SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    def __exit__(self, *failure: object) -> None:
        self.stop()


@define
class BrokerStarter:
    """
    Starts brokers on a data directory, again after each crash, every start in a
    working directory of its own under ``place`` so that each one's log is kept.

    :ivar options: options for every start, after ``--data-dir``.
    :ivar reactor: as for :class:`BrokerProcess`.
    """

    place: Path
    options: tuple[str, ...] = ()
    reactor: str | None = None
    starts: int = 0

    def __call__(self, data_dir: Path, *options: str) -> BrokerProcess:
        """
        :param options: options for this start only, after :attr:`options`.
        :returns: a broker on ``data_dir``, without a web port.
        """
        self.starts += 1
        return BrokerProcess(
            self.place / f"broker-{self.starts}",
            "--data-dir",
            str(data_dir),
            *self.options,
            *options,
            http=None,
            reactor=self.reactor,
        )
