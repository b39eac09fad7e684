"""
A real ``haproxy`` (Debian's package) in front of a broker, on free loopback ports.

Where ``haproxy`` is missing the tests that need it are skipped, with the
reason, unless ``STOMPBROKER_REQUIRE_HAPROXY=1`` (set by ``.ci/run``, which
installs it): they then fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.support.process import free_port, wait_for_port

REQUIRE = os.environ.get("STOMPBROKER_REQUIRE_HAPROXY") == "1"

CONFIG = """\
defaults
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout tunnel 60s

frontend stomp
    mode tcp
    bind 127.0.0.1:{stomp_port}
    default_backend broker_stomp

backend broker_stomp
    mode tcp
    server broker 127.0.0.1:{broker_proxy_port} send-proxy-v2

frontend web
    mode {web_mode}
    {forwardfor}
    bind 127.0.0.1:{web_port}
    default_backend broker_web

backend broker_web
    mode {web_mode}
    server broker 127.0.0.1:{broker_web_port}{web_send_proxy}
"""


def haproxy_binary() -> str:
    """
    :returns: the path of ``haproxy``.
    :raises pytest.skip.Exception: if it is missing (a failure under CI).
    """
    found = shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
    )
    if found is None:
        reason = "haproxy is not installed (apt-get install haproxy)"
        if REQUIRE:
            pytest.fail(f"{reason}, and STOMPBROKER_REQUIRE_HAPROXY=1 requires it")
        pytest.skip(reason)
    return found


class HAProxy(AbstractContextManager["HAProxy"]):
    """
    ``haproxy -db`` with a TCP frontend that sends PROXY v2 headers to
    ``broker_proxy_port``, and an HTTP frontend (``option forwardfor``) in front
    of the broker's web port; a context manager that stops it.

    :param web_send_proxy: make the web frontend a TCP one that sends PROXY v2
        headers too, for a broker whose web port is ``--http haproxy:tcp:PORT``.

    :ivar stomp_port: the TCP frontend's port.
    :ivar web_port: the HTTP frontend's port.
    """

    def __init__(
        self,
        workdir: Path,
        broker_proxy_port: int,
        broker_web_port: int,
        *,
        web_send_proxy: bool = False,
    ) -> None:
        binary = haproxy_binary()
        self.stomp_port = free_port()
        self.web_port = free_port()
        while self.web_port == self.stomp_port:
            self.web_port = free_port()
        config = workdir / "haproxy.cfg"
        config.write_text(
            CONFIG.format(
                stomp_port=self.stomp_port,
                web_port=self.web_port,
                broker_proxy_port=broker_proxy_port,
                broker_web_port=broker_web_port,
                web_mode="tcp" if web_send_proxy else "http",
                forwardfor="" if web_send_proxy else "option forwardfor",
                web_send_proxy=" send-proxy-v2" if web_send_proxy else "",
            )
        )
        self.log_path = workdir / "haproxy.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [binary, "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        try:
            for port in (self.stomp_port, self.web_port):
                wait_for_port(port, process=self.process)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def __exit__(self, *failure: object) -> None:
        self.stop()
