"""
What a cluster costs per delivered message, against one process.

Usage: ``python -m benchmarks.cluster_cpu [--kind topic|queue] [--count N]
[--subscribers N] [--producers N] [--consumers N] [--ack MODE] [--repeat R]``

In one run it starts one broker with the memory engine, and a cluster of two
nodes on one ``redis-server`` (:func:`benchmarks.cluster.cluster_target`), and
runs the same load against each: with ``--kind topic`` (the default) one
publisher and ``N`` topic subscribers; with ``--kind queue`` ``--producers``
producers and ``--consumers`` consumers of one queue (4 and 4,
``client-individual``, by default).  In the cluster the senders are on node A
and the receivers on node B, so that every message crosses Redis.  It reads
every process's CPU seconds (user and system, from ``/proc/PID/stat``) before
and after each run and prints them per delivered message (one message to one
receiver), each process and in all, with the cluster's total against the
single process's.

The client processes run on the same machine and are not counted; the load
average before and after each run is printed, since other work on the machine
slows the runs (CPU seconds per message move much less than rates do).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.cases import ACK_MODES, Case, Settings, Target
from benchmarks.cluster import cluster_target
from benchmarks.connection import Endpoint
from benchmarks.launcher import BrokerProcess
from benchmarks.measure import process_cpu_seconds
from benchmarks.scenarios import run_case

#: The reactor of every broker here (the redis engine needs an asyncio one).
REACTOR = "uvloop"
CREDENTIALS: dict[str, Any] = {"login": None, "passcode": None, "vhost": None}


def measured(case: Case, target: Target, settings: Settings) -> dict[str, Any]:
    """
    Run ``case`` against ``target`` and read its processes' CPU around the run.

    :returns: the run's result, with ``cpu_us`` (process name -> CPU
        microseconds per delivered message), ``cpu_total_us`` and ``load``.
    """
    parts = target.parts or (("broker", target.pid),)
    load_before = os.getloadavg()[0]
    before = {name: process_cpu_seconds(pid) for name, pid in parts}
    result = run_case(case, target, settings)
    after = {name: process_cpu_seconds(pid) for name, pid in parts}
    delivered = max(1, result.get("delivered") or 0)
    cpu_us = {
        name: round(((after[name] or 0.0) - (before[name] or 0.0)) * 1e6 / delivered, 3)
        for name, _ in parts
    }
    result.update(
        cpu_us=cpu_us,
        cpu_total_us=round(sum(cpu_us.values()), 3),
        load=(round(load_before, 2), round(os.getloadavg()[0], 2)),
    )
    return result


def build_parser() -> argparse.ArgumentParser:
    """:returns: the command line's parser."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_cpu", description=__doc__)
    parser.add_argument(
        "--kind", choices=("topic", "queue"), default="topic", help="what to send to"
    )
    parser.add_argument("--count", type=int, default=100_000, help="messages published per run")
    parser.add_argument("--subscribers", type=int, default=10, help="topic subscribers")
    parser.add_argument("--producers", type=int, default=4, help="queue producers")
    parser.add_argument("--consumers", type=int, default=4, help="queue consumers")
    parser.add_argument(
        "--ack", choices=ACK_MODES, default="client-individual", help="queue ack mode"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per broker")
    parser.add_argument("--size", type=int, default=117, help="body bytes")
    return parser


def main(argv: list[str]) -> int:
    """:returns: 0 when every run delivered every message once, 1 otherwise."""
    args = build_parser().parse_args(argv)
    counts = (args.count, args.subscribers, args.producers, args.consumers, args.repeat)
    if min(counts) < 1:
        print(
            "--count, --subscribers, --producers, --consumers and --repeat must be at least 1",
            file=sys.stderr,
        )
        return 2
    settings = Settings(size=args.size, duration=600.0, max_count=args.count, procs=2)
    ok = True
    totals: dict[str, list[float]] = {"single": [], "cluster": []}
    with tempfile.TemporaryDirectory(prefix="stompbench-") as workdir:
        with BrokerProcess(Path(workdir) / "single", http=None, reactor=REACTOR) as single:
            endpoint = Endpoint("127.0.0.1", single.port, None, **CREDENTIALS)
            target = Target("single", endpoint, single.pid)
            for _ in range(args.repeat):
                result = measured(_case(args, ""), target, settings)
                ok = ok and result["ok"]
                totals["single"].append(result["cpu_total_us"])
                _print(result)
        with cluster_target(Path(workdir) / "cluster", [], REACTOR, CREDENTIALS) as cluster:
            for _ in range(args.repeat):
                result = measured(_case(args, "cluster-"), cluster, settings)
                ok = ok and result["ok"]
                totals["cluster"].append(result["cpu_total_us"])
                _print(result)
    single_us, cluster_us = min(totals["single"]), min(totals["cluster"])
    print(
        f"# best of {args.repeat}: one process {single_us:.3f} us, cluster {cluster_us:.3f} us"
        f" CPU per delivered message: {cluster_us / single_us:.2f}x"
    )
    return 0 if ok else 1


def _case(args: argparse.Namespace, prefix: str) -> Case:
    """:returns: the case the command line asks for, as ``prefix`` names its scenarios."""
    if args.kind == "topic":
        return Case(f"{prefix}fanout", subscribers=args.subscribers)
    return Case(f"{prefix}queue", producers=args.producers, consumers=args.consumers, ack=args.ack)


def _print(result: dict[str, Any]) -> None:
    shown = ("case", "ok", "msgs_per_s", "delivered", "deliveries_per_s", "cpu_us", "cpu_total_us")
    shown += ("load",)
    print(json.dumps({key: result.get(key) for key in shown}), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
