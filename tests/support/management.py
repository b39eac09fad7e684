"""A real broker with ``--auth`` and an access file, for the management API, CLI and console."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.process import BrokerProcess, free_port, subprocess_env

#: ``admin`` may do everything, ``reader`` only look; anonymous STOMP clients send and receive.
ACCESS = """
[anonymous]
read = ["#"]
write = ["#"]

[users.admin]
read = ["#"]
write = ["#"]
admin = ["#"]

[users.reader]
read = ["#"]
"""
ADMIN = ("admin", "secret")
READER = ("reader", "secret")


def managed_broker(workdir: Path, *args: str) -> BrokerProcess:
    """:returns: a broker whose API knows ``admin`` and ``reader`` (password ``secret``)."""
    access = workdir / "access.toml"
    access.write_text(ACCESS)
    return BrokerProcess(
        workdir,
        "--auth",
        "memory:admin:secret:reader:secret",
        "--allow-anonymous",
        "--access",
        str(access),
        "--heartbeat",
        "0,0",
        "--monitor-interval",
        "0.5",
        *args,
    )


def cli(
    broker: BrokerProcess | None, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``stompbroker ARGS`` with ``--url`` of the broker (credentials ``admin`` by default)."""
    environment = subprocess_env()
    environment.update(STOMPBROKER_USER="admin", STOMPBROKER_PASSWORD="secret")
    environment.update(env or {})
    url = f"http://127.0.0.1:{broker.http_port if broker else free_port()}"
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from stompbroker.app.cli import main; raise SystemExit(main())",
            *args,
            "--url",
            url,
        ],
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
