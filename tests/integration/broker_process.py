"""
Start the real broker with ``twistd -n stompbroker`` on a free loopback port.

The subprocess gets the checkout first on ``PYTHONPATH``, so it runs the code
under test (and finds the plugin in ``twisted/plugins/``) whether or not the
package is installed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def twistd_command() -> list[str]:
    """:returns: the argv that runs this interpreter's ``twistd``."""
    script = Path(sys.executable).parent / "twistd"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"]


def free_port() -> int:
    """:returns: a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, timeout: float = 15.0, process: subprocess.Popen | None = None) -> None:
    """Wait until something accepts connections on ``port``, or fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


def subprocess_env() -> dict[str, str]:
    """The environment for a child that must import the checkout's code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


class BrokerProcess:
    """
    A ``twistd -n stompbroker`` child process.

    :param workdir: its working directory (logs land in ``broker.log`` there).
    :param args: extra options after ``stompbroker``.
    :param http: the ``--http`` endpoint, with ``{port}`` standing for
        :attr:`http_port`, a free port (never the default 15674, which parallel
        brokers would fight over); ``None`` turns the web port off.
    :param reactor: twistd's ``--reactor``; ``None`` for twistd's default.
    """

    def __init__(
        self,
        workdir: Path,
        *args: str,
        http: str | None = "tcp:{port}:interface=127.0.0.1",
        reactor: str | None = None,
    ) -> None:
        self.port = free_port()
        self.http_port = free_port()
        while self.http_port == self.port:
            self.http_port = free_port()
        self.workdir = workdir
        self.log_path = workdir / "broker.log"
        self._log = open(self.log_path, "wb")
        command = [
            *twistd_command(),
            "--nodaemon",
            "--pidfile=",
            "--logfile=-",
            *([f"--reactor={reactor}"] if reactor else []),
            "stompbroker",
            "--port",
            str(self.port),
            "--http",
            "none" if http is None else http.format(port=self.http_port),
            *args,
        ]
        self.process = subprocess.Popen(
            command,
            cwd=workdir,
            env=subprocess_env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(self.port, process=self.process)
            if http is not None:
                wait_for_port(self.http_port, process=self.process)
        except BaseException:
            self.stop()
            raise

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Stop the broker with SIGTERM (SIGKILL if it lingers)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()
