"""
What resuming a session on another node of a Redis cluster costs, against
resuming it on its own node: real ``twistd`` nodes on a real ``redis-server``.

Usage: ``python -m benchmarks.resume_cluster [--missed N] [--repeat R] [--reactor uvloop]
[--where both|same|other]``

Each run: a resumable client of node A subscribes to a topic and its socket is
cut (no DISCONNECT); ``--missed`` messages are published on A (each with ``seq``,
the last with a receipt), which A's detached session buffers; then the client
comes back with its token, on A (**same node**) or on B (**other node**: B takes
the record in Redis, subscribes, asks A over pub/sub, and A hands the buffer
over).  The figure is the milliseconds from sending CONNECT to the last missed
MESSAGE read, and, less at the mercy of a loaded machine, the CPU milliseconds
the two nodes and Redis spent meanwhile (``/proc/PID/task/*/schedstat``,
nanoseconds on a CPU; their once-a-second ticks fall in some runs).  Checked
each time: ``resumed:true``, every message once and in order.  Runs alternate
same/other, so that both see the same load.

It prints a table (median, and every run), then one JSON line per figure.
"""

from __future__ import annotations

import argparse
import socket
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
from benchmarks.wire import SEQ_PATTERN, command_of, header_of, split_frames

TOPIC = "/topic/resume-cluster"
BODY = b"x" * 117
#: Room for every missed message (about 250 bytes each).
BUFFER = "64M"
#: Bound on each blocking read, in seconds.
TIMEOUT = 30.0
#: How long a node may take to notice a cut socket (it reads the FIN at once).
NOTICE = 0.3
#: How long the nodes get to take in what was published before a resume is
#: timed (the other node reads it from Redis too, and drops it): the figures
#: are the resume's own.
SETTLE = 0.2


class Client:
    """A raw STOMP 1.2 connection, blocking, for set-up and the timed resume."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rest = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self, count: int) -> list[bytes]:
        """:returns: the next ``count`` frames (heart-beat EOLs dropped)."""
        got: list[bytes] = []
        while len(got) < count:
            frames, self.rest = split_frames(self.rest)
            got.extend(frames)
            if len(got) >= count:
                break
            data = self.sock.recv(1 << 20)
            if not data:
                raise BenchmarkError(f"the broker closed the connection after {len(got)} frames")
            self.rest += data
        if len(got) > count:
            raise BenchmarkError("more frames than expected")
        return got

    def cut(self) -> None:
        """Drop the connection as a dead network would: no DISCONNECT."""
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def close(self) -> None:
        self.sock.close()


def connect_frame(token: str) -> bytes:
    return f"CONNECT\naccept-version:1.2\nhost:/\nresume-token:{token}\n\n\0".encode()


def detached_session(node: BrokerProcess, missed: int) -> str:
    """
    :returns: the token of a session of ``node`` subscribed to :data:`TOPIC`,
        cut, that then missed ``missed`` messages published on ``node``.
    """
    client = Client(node.port)
    client.send(connect_frame(""))
    [connected] = client.read(1)
    token = header_of(connected, "resume-token")
    if token is None:
        raise BenchmarkError("no resume-token in CONNECTED: is --resume-window 0?")
    client.send(f"SUBSCRIBE\nid:s\ndestination:{TOPIC}\nreceipt:r\n\n\0".encode())
    client.read(1)
    client.cut()
    time.sleep(NOTICE)
    publisher = Client(node.port)
    publisher.send(connect_frame("").replace(b"resume-token:\n", b""))
    publisher.read(1)
    sends = [
        b"SEND\ndestination:%b\nseq:%d\n%b\n%b\0"
        % (TOPIC.encode(), seq, b"receipt:done\n" if seq == missed - 1 else b"", BODY)
        for seq in range(missed)
    ]
    publisher.send(b"".join(sends))
    publisher.read(1)
    publisher.close()
    return token


def cpu_ns(pids: list[int]) -> int:
    """:returns: nanoseconds the processes ``pids`` (all their threads) have run on a CPU."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total


def resume(node: BrokerProcess, token: str, missed: int) -> float:
    """:returns: seconds from CONNECT to the last missed MESSAGE; checks what came."""
    client = Client(node.port)
    started = time.perf_counter()
    client.send(connect_frame(token))
    frames = client.read(1 + missed)
    elapsed = time.perf_counter() - started
    # Ended for good, so that sessions do not pile up detached over the runs.
    client.send(b"DISCONNECT\nreceipt:bye\n\n\0")
    client.read(1)
    client.close()
    connected = frames[0]
    if command_of(connected) != b"CONNECTED" or header_of(connected, "resumed") != "true":
        raise BenchmarkError(f"not resumed: {connected[:300]!r}")
    seqs = [int(seq) for seq in SEQ_PATTERN.findall(b"\0".join(frames[1:]) + b"\0")]
    if seqs != list(range(missed)):
        raise BenchmarkError(f"resumed with {len(seqs)} of {missed} messages, or out of order")
    return elapsed


def measure(
    missed: int, repeat: int, reactor: str, workdir: Path, where: str = "both"
) -> list[dict[str, Any]]:
    """
    :param where: ``same``, ``other`` or ``both`` nodes to resume on (``same``
        runs on a broker without resumption across nodes too, for a before/after).
    :returns: the JSON records: median milliseconds, and every run's.
    """
    redis = RedisServer(workdir / "redis")
    nodes: list[BrokerProcess] = []
    try:
        for name in ("a", "b"):
            nodes.append(
                BrokerProcess(
                    workdir / f"node-{name}",
                    "--engine",
                    redis.url,
                    "--resume-buffer",
                    BUFFER,
                    http=None,
                    reactor=reactor,
                )
            )
        a, b = nodes
        targets = [("same node", a), ("other node", b)]
        if where != "both":
            targets = [targets[0] if where == "same" else targets[1]]
        runs: dict[str, list[float]] = {label: [] for label, _ in targets}
        cpu: dict[str, list[float]] = {label: [] for label, _ in targets}
        pids = [a.pid, b.pid, redis.process.pid]
        for _ in range(repeat):
            for label, target in targets:
                token = detached_session(a, missed)
                time.sleep(SETTLE)
                before = cpu_ns(pids)
                runs[label].append(resume(target, token, missed) * 1000)
                cpu[label].append((cpu_ns(pids) - before) / 1e6)
    finally:
        for node in nodes:
            node.stop()
        redis.stop()
    common = {"repeats": repeat, "python": sys.version.split()[0], "reactor": reactor}
    return [
        {
            "benchmark": "resume_cluster",
            "figure": f"resume of {missed} missed messages, {label}",
            "value": round(statistics.median(values), 2),
            "unit": unit,
            "runs": " ".join(f"{value:.1f}" for value in values),
            **common,
        }
        for figures, unit in ((runs, "  ms to caught-up"), (cpu, "  CPU ms, nodes + Redis"))
        for label, values in figures.items()
    ]


def main(argv: list[str]) -> int:
    """
    Measure, and print the table and the JSON lines.

    :returns: the exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.resume_cluster")
    parser.add_argument("--missed", type=int, default=1000, help="default 1000")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (default 5)")
    parser.add_argument(
        "--reactor", choices=("uvloop", "asyncio"), default="uvloop", help="default uvloop"
    )
    parser.add_argument(
        "--where", choices=("both", "same", "other"), default="both", help="default both"
    )
    options = parser.parse_args(argv)
    if options.missed < 1 or options.repeat < 1:
        parser.error("--missed and --repeat at least 1")
    with tempfile.TemporaryDirectory(prefix="resume-cluster-") as workdir:
        results = measure(
            options.missed, options.repeat, options.reactor, Path(workdir), options.where
        )
    print_results(
        results,
        (
            ("figure", "figure", "<48"),
            ("value", "value", ">10"),
            ("  unit", "unit", "<28"),
            ("runs", "runs", "<40"),
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
