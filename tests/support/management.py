"""A real broker with ``--auth`` and an access file, for the management API, CLI and console."""

from __future__ import annotations

from pathlib import Path

from tests.support.process import BrokerProcess

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
