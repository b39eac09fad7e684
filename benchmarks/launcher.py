"""
Start stompbroker for a benchmark run, when no ``--target`` is given.

The broker runs as ``twistd -n stompbroker`` on a free loopback port, from
this checkout (first on ``PYTHONPATH``), with its log in a file so that its
output never competes with the suite's.  When the installed broker has an
HTTP/WebSocket listener (``--http``), it gets one too, so the WebSocket
scenario has an endpoint.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.errors import BrokerStartFailed

ROOT = Path(__file__).resolve().parents[1]
#: Where the WebSocket endpoint of ``--http`` serves STOMP.
WEBSOCKET_PATH = "/ws"


def free_port() -> int:
    """:returns: a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def has_http_listener() -> bool:
    """:returns: whether this checkout's ``twistd stompbroker`` accepts ``--http``."""
    try:
        from stompbroker.app.tap import Options
    except ImportError:
        return False
    return hasattr(Options, "opt_http")


#: The reactor every broker the suite starts runs on, unless told otherwise.
DEFAULT_REACTOR = "uvloop"


class StartedBroker:
    """
    A ``twistd -n stompbroker`` child, stopped by :meth:`stop`.

    :param log_path: where its output goes; its directory is the broker's working directory.
    :param extra_args: more options after ``stompbroker``.
    :param reactor: a twistd reactor name; uvloop by default, as the README runs
        the broker (``epoll`` and ``asyncio`` work too; ``None`` leaves twistd's own).
    :param timeout: how long it may take to listen.
    :raises BrokerStartFailed: when it exits or does not listen in time.

    :ivar port: its STOMP port.
    :ivar ws_url: its WebSocket endpoint, if it has one.
    :ivar pid: its process id.
    """

    def __init__(
        self,
        log_path: Path,
        extra_args: tuple[str, ...] = (),
        reactor: str | None = DEFAULT_REACTOR,
        timeout: float = 20.0,
    ) -> None:
        self.port = free_port()
        self.ws_url: str | None = None
        ports = [self.port]
        args = ["--port", str(self.port)]
        if has_http_listener():
            http_port = free_port()
            while http_port == self.port:
                http_port = free_port()
            ports.append(http_port)
            args += ["--http", f"tcp:{http_port}:interface=127.0.0.1"]
            self.ws_url = f"ws://127.0.0.1:{http_port}{WEBSOCKET_PATH}"
        twistd = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"]
        if reactor:
            twistd += ["--reactor", reactor]
        command = [
            *twistd,
            "--nodaemon",
            "--pidfile=",
            "--logfile=-",
            "stompbroker",
            *args,
            *extra_args,
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "wb")
        # Its own working directory: files the broker keeps relative to it (the
        # default data directory of its message store) must not be shared with
        # another broker running from the checkout.
        self.process = subprocess.Popen(
            command, cwd=log_path.parent, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.pid = self.process.pid
        try:
            for port in ports:
                self._wait_listening(port, timeout)
        except BrokerStartFailed:
            self.stop()
            raise

    def _wait_listening(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerStartFailed(
                    f"stompbroker exited with {self.process.returncode}; see {self.log_path}"
                )
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise BrokerStartFailed(
            f"stompbroker did not listen on {port} within {timeout} s; see {self.log_path}"
        )

    def stop(self) -> None:
        """Stop it with SIGTERM, or SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()
