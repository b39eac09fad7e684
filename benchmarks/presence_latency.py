"""
How soon a member's join and leave reach a ``presence:members`` watcher on
another node of a Redis cluster, and on the same node: real ``twistd`` nodes on
a real ``redis-server``.

Usage: ``python -m benchmarks.presence_latency [--repeat R] [--reactor uvloop]``

A watcher on node A subscribes to a topic with ``presence:members`` and reads
the member list.  Each run, a new user (the nodes run with ``--auth passwd:``, a
password file of cheap hashes) subscribes on node B
(**other node**) or on A (**same node**), then disconnects; the figures are the
milliseconds from sending the SUBSCRIBE to reading the watcher's ``join``, and
from sending the DISCONNECT to reading its ``leave``.  Runs alternate the two
nodes, so that both see the same load.  Checked each time: the event names the
user.

It prints a table (median, and every run), then one JSON line per figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cluster import RedisServer
from benchmarks.errors import BenchmarkError
from benchmarks.launcher import BrokerProcess
from benchmarks.report import print_results
from benchmarks.resume_cluster import Client
from benchmarks.wire import header_of
from stompbroker.security.passwords import PasswordEntry, ScryptParams

TOPIC = "/topic/presence-latency"
#: Cheap password hashes: logging in is not what is measured.
FAST = ScryptParams(n=16, r=1, p=1)
PASSCODE = "x"


def write_users(path: Path, logins: list[str]) -> Path:
    """:returns: ``path``, a password file of ``logins``, each with :data:`PASSCODE`."""
    lines = [PasswordEntry.create(login, PASSCODE, (), FAST).format() for login in logins]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def connect(port: int, login: str) -> Client:
    """:returns: a STOMP 1.2 client of ``port`` logged in as ``login``, CONNECTED read."""
    client = Client(port)
    client.send(f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{login}\npasscode:x\n\n\0".encode())
    client.read(1)
    return client


def event(watcher: Client, kind: str, member: str) -> None:
    """Read the watcher's next frame: it must be ``kind`` for ``member``."""
    [frame] = watcher.read(1)
    got = (header_of(frame, "stompbroker-presence"), header_of(frame, "presence-member"))
    if got != (kind, member):
        raise BenchmarkError(f"expected {kind} of {member}, got {got}")


def one_run(watcher: Client, port: int, member: str) -> tuple[float, float]:
    """:returns: seconds from SUBSCRIBE to the join read, and from DISCONNECT to the leave."""
    client = connect(port, member)
    started = time.perf_counter()
    client.send(f"SUBSCRIBE\nid:s\ndestination:{TOPIC}\n\n\0".encode())
    event(watcher, "join", member)
    joined = time.perf_counter() - started
    started = time.perf_counter()
    client.send(b"DISCONNECT\n\n\0")
    event(watcher, "leave", member)
    left = time.perf_counter() - started
    client.close()
    return joined, left


def measure(repeat: int, reactor: str, workdir: Path) -> list[dict[str, Any]]:
    """:returns: the JSON records: median milliseconds, and every run's."""
    redis = RedisServer(workdir / "redis")
    nodes: list[BrokerProcess] = []
    try:
        logins = ["watcher", *(f"user-{number}" for number in range(repeat))]
        users = write_users(workdir / "users.txt", logins)
        for name in ("a", "b"):
            nodes.append(
                BrokerProcess(
                    workdir / f"node-{name}",
                    "--engine",
                    redis.url,
                    "--auth",
                    f"passwd:{users}",
                    reactor=reactor,
                )
            )
        a, b = nodes
        watcher = connect(a.port, "watcher")
        watcher.send(f"SUBSCRIBE\nid:w\ndestination:{TOPIC}\npresence:members\n\n\0".encode())
        watcher.read(1)  # the member list
        targets = (("same node", a), ("other node", b))
        runs: dict[str, list[float]] = {}
        for number in range(repeat):
            for label, target in targets:
                joined, left = one_run(watcher, target.port, f"user-{number}")
                runs.setdefault(f"join, {label}", []).append(joined * 1000)
                runs.setdefault(f"leave, {label}", []).append(left * 1000)
        watcher.close()
    finally:
        for node in nodes:
            node.stop()
        redis.stop()
    common = {"repeats": repeat, "python": sys.version.split()[0], "reactor": reactor}
    return [
        {
            "benchmark": "presence_latency",
            "figure": f"member {label}",
            "value": round(statistics.median(values), 2),
            "unit": "  ms to the watcher",
            "runs": " ".join(f"{value:.1f}" for value in values),
            **common,
        }
        for label, values in runs.items()
    ]


def main(argv: list[str]) -> int:
    """
    Measure, and print the table and the JSON lines.

    :returns: the exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.presence_latency")
    parser.add_argument("--repeat", type=int, default=20, help="runs per node (default 20)")
    parser.add_argument("--reactor", default="uvloop", help="twistd's reactor (default uvloop)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="presence-latency-") as workdir:
        try:
            records = measure(args.repeat, args.reactor, Path(workdir))
        except BenchmarkError as error:
            print(f"presence_latency: {error}", file=sys.stderr)
            return 1
    print_results(
        records,
        (
            ("figure", "figure", "<32"),
            ("value", "value", ">10"),
            ("  unit", "unit", "<22"),
            ("runs", "runs", "<40"),
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
