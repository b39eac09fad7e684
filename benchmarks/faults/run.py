"""
``python -m benchmarks faults [FAULT ...]``: each fault ``--repeat`` times, each
run on a fresh cluster; one JSON line per run on stdout, then the table.

One run: start Redis and the nodes; consumers on node B (and a standby on A,
so that what B held has somewhere to go), publishers on A; load for
``--warmup`` seconds; inject the fault, hold it, heal it; load ``--after``
seconds more; stop the publishers (waiting for their receipts), wait until
every receipted message is delivered (at most ``--drain`` seconds) and
``--linger`` more for late copies; stop everything and judge the history.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import attrs
from attrs import define

from benchmarks.errors import BenchmarkError
from benchmarks.faults.clients import Consumer, History, Publisher
from benchmarks.faults.cluster import ClusterOptions, FaultCluster
from benchmarks.faults.kinds import FAULTS, Fault, fault_named
from benchmarks.faults.servers import FSYNC_POLICIES
from benchmarks.faults.verdict import Timeline, judge

__all__ = ["Load", "build_parser", "main", "run_fault"]

#: Seconds the consumers may take to subscribe.
SUBSCRIBE_TIMEOUT = 10.0


@define(frozen=True)
class Load:
    """
    The clients of a run and its phases.

    :ivar publishers: publishers on node A.
    :ivar consumers: consumers on node B.
    :ivar standby: consumers on node A.
    :ivar rate: messages a second, all publishers together.
    :ivar window: receipts a publisher may wait for at once.
    :ivar prefetch: each consumer's ``prefetch-count``.
    :ivar warmup: seconds of load before the fault.
    :ivar down: seconds a fault lasts (a node stopped or cut past the node
        timeout lasts twice the timeout, at least).
    :ivar after: seconds of load after the fault heals.
    :ivar drain: seconds to wait for receipted messages after the load.
    :ivar linger: seconds to wait after that for late copies.
    """

    publishers: int = 2
    consumers: int = 2
    standby: int = 1
    rate: float = 200.0
    window: int = 100
    prefetch: int = 20
    warmup: float = 2.0
    down: float = 2.0
    after: float = 5.0
    drain: float = 20.0
    linger: float = 2.0


def run_fault(
    fault: Fault, load: Load, options: ClusterOptions, workdir: Path, history: History
) -> dict[str, Any]:
    """
    Run ``fault`` once on a fresh cluster.

    :param workdir: where the processes of this run get their directories.
    :param history: where the clients write (the caller may keep it).
    :returns: the run's figures (:func:`benchmarks.faults.verdict.judge`) and its settings.
    :raises BenchmarkError: when the cluster does not start or the consumers cannot subscribe.
    """
    options = fault.options(options)
    cluster = FaultCluster(workdir, options, fault.layout)
    clients: list[Any] = []
    extra: list[Any] = []
    try:
        cluster.start()
        queue = f"/queue/faults.{fault.name}"

        def order(*names: str) -> Any:
            return lambda: [cluster.address(name) for name in names]

        consumers = [
            Consumer(f"cb{i}", history, order("b", "a"), queue, load.prefetch)
            for i in range(load.consumers)
        ] + [
            Consumer(f"ca{i}", history, order("a", "b"), queue, load.prefetch)
            for i in range(load.standby)
        ]
        clients += consumers
        for consumer in consumers:
            consumer.start()
        for consumer in consumers:
            if not consumer.subscribed.wait(SUBSCRIBE_TIMEOUT):
                raise BenchmarkError(f"consumer {consumer.name} did not subscribe")
        rate = load.rate / load.publishers
        publishers = [
            Publisher(f"p{i}", history, order("a", "b"), queue, rate, load.window)
            for i in range(load.publishers)
        ]
        clients += publishers
        for publisher in publishers:
            publisher.start()
        time.sleep(load.warmup)
        hold = fault.hold(load.down, options.node_timeout)
        started = time.monotonic()
        extra = fault.load(cluster, history)
        clients += extra
        for thread in extra:
            thread.start()
        fault.inject(cluster)
        time.sleep(max(0.0, started + hold - time.monotonic()))
        for thread in extra:
            thread.stop()
        fault.heal(cluster)
        healed = time.monotonic()
        time.sleep(load.after)
        quiet = time.monotonic()
        for publisher in publishers:
            publisher.stop()
        for publisher in publishers:
            publisher.join(timeout=load.drain + 35)
        _drain(history, load.drain)
        time.sleep(load.linger)
    finally:
        for client in clients:
            client.stop()
        for client in clients:
            client.join(timeout=5)
        cluster.stop()
    result: dict[str, Any] = {
        "benchmark": "faults",
        "fault": fault.name,
        "fsync": options.fsync,
        "node_timeout": options.node_timeout,
        "wait_replicas": options.wait_replicas,
        "held_s": round(healed - started, 3),
        "rate": load.rate,
    }
    result.update(judge(history.snapshot(), Timeline(started, healed, quiet)))
    result.update(fault.figures(extra, started, healed))
    return result


def _drain(history: History, seconds: float) -> None:
    """Wait until every receipted ``seq`` has been delivered, at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        events = history.snapshot()
        receipted = {event.seq for event in events if event.kind == "receipt"}
        delivered = {event.seq for event in events if event.kind == "message"}
        if receipted <= delivered:
            return
        time.sleep(0.2)


def build_parser() -> argparse.ArgumentParser:
    """:returns: the parser of ``python -m benchmarks faults``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks faults",
        description="Inject faults into a two-node redis-engine cluster under a steady"
        " persistent queue load and check what the clients saw.",
        epilog="See docs/cluster.md, 'What a fault costs'.",
    )
    parser.add_argument(
        "faults",
        nargs="*",
        metavar="FAULT",
        help=f"faults to inject, of {', '.join(FAULTS)} (default: all)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each fault (default: 3)")
    parser.add_argument(
        "--fsync",
        choices=FSYNC_POLICIES,
        default="everysec",
        help="Redis's appendfsync for faults that do not set it (default: everysec)",
    )
    parser.add_argument("--node-timeout", type=float, default=2.0, help="nodes' (default: 2)")
    parser.add_argument(
        "--engine-outage-hold", type=float, default=30.0, help="nodes' (default: 30)"
    )
    defaults = Load()
    for name, kind, text in (
        ("publishers", int, "publishers on node A"),
        ("consumers", int, "client-individual consumers on node B"),
        ("standby", int, "consumers on node A"),
        ("rate", float, "messages a second, all publishers together"),
        ("window", int, "receipts a publisher waits for at once"),
        ("prefetch", int, "each consumer's prefetch-count"),
        ("warmup", float, "seconds of load before the fault"),
        ("down", float, "seconds a fault lasts (node-stop, proxy-cut-long: 2x node timeout)"),
        ("after", float, "seconds of load after the fault heals"),
        ("drain", float, "seconds to wait for every receipted message"),
        ("linger", float, "seconds to wait after that for late copies"),
    ):
        default = getattr(defaults, name)
        parser.add_argument(
            f"--{name}", type=kind, default=default, help=f"{text} (default: {default:g})"
        )
    parser.add_argument("--reactor", default="uvloop", help="the nodes' reactor (default: uvloop)")
    parser.add_argument(
        "--broker-arg", action="append", default=[], metavar="ARG", help="a node option"
    )
    parser.add_argument("--json-out", type=Path, help="also append the JSON lines to FILE")
    parser.add_argument(
        "--history", type=Path, metavar="DIR", help="write each run's events as JSON lines in DIR"
    )
    return parser


def print_table(results: list[dict[str, Any]], out: TextIO) -> None:
    """One row per fault: each figure as its runs' values, comma-separated."""
    columns = (
        ("lost", "lost"),
        ("duplicates_silent", "dup silent"),
        ("duplicates_redelivered", "dup redelivered"),
        ("consumer_errors", "cons ERR"),
        ("consumer_disconnects", "cons cut"),
        ("publisher_errors", "pub ERR"),
        ("publisher_disconnects", "pub cut"),
        ("recover_s", "recover s"),
        ("gap_s", "B gap s"),
        ("stall_s", "stall s"),
        ("worst_s", "worst s"),
        ("receipted", "receipted"),
    )
    rows: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        rows.setdefault(result["fault"], []).append(result)
    header = ["fault", *(title for _, title in columns), "ok"]
    print("| " + " | ".join(header) + " |", file=out)
    print("|" + " --- |" * len(header), file=out)
    for fault, runs in rows.items():
        cells = [fault]
        for key, _ in columns:
            cells.append(
                ", ".join("-" if run.get(key) is None else f"{run[key]:g}" for run in runs)
            )
        cells.append(f"{sum(bool(run['ok']) for run in runs)}/{len(runs)}")
        print("| " + " | ".join(cells) + " |", file=out)


def main(argv: list[str]) -> int:
    """
    :returns: 0 when every run kept the guarantees, 1 otherwise, 2 for bad options.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        faults = [fault_named(name) for name in args.faults or FAULTS]
    except BenchmarkError as error:
        parser.error(str(error))
    if args.repeat < 1 or args.rate <= 0 or min(args.publishers, args.consumers) < 1:
        parser.error("--repeat, --rate, --publishers and --consumers must be positive")
    load = Load(**{field.name: getattr(args, field.name) for field in attrs.fields(Load)})
    options = ClusterOptions(
        args.node_timeout, args.engine_outage_hold, args.fsync, args.reactor, tuple(args.broker_arg)
    )
    results = []
    out = open(args.json_out, "a") if args.json_out else None
    try:
        with tempfile.TemporaryDirectory(prefix="stompfaults-") as workdir:
            for fault in faults:
                for repeat in range(args.repeat):
                    print(f"# {fault.name}: run {repeat + 1} of {args.repeat}", file=sys.stderr)
                    history = History()
                    place = Path(workdir) / f"{fault.name}-{repeat}"
                    try:
                        result = run_fault(fault, load, options, place, history)
                    except BenchmarkError as error:
                        result = {"benchmark": "faults", "fault": fault.name, "ok": False}
                        result["error"] = str(error)
                    result["repeat"] = repeat
                    line = json.dumps(result)
                    print(line, flush=True)
                    if out is not None:
                        print(line, file=out, flush=True)
                    if args.history is not None:
                        _write_history(args.history / f"{fault.name}-{repeat}.jsonl", history)
                    results.append(result)
    except KeyboardInterrupt:
        print("# interrupted: the table shows the runs that finished", file=sys.stderr)
    finally:
        if out is not None:
            out.close()
    print()
    print_table(results, sys.stdout)
    return 0 if results and all(result["ok"] for result in results) else 1


def _write_history(path: Path, history: History) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as file, contextlib.suppress(OSError):
        for event in history.snapshot():
            print(json.dumps([round(event.at, 4), event.kind, event.client, event.seq,
                              event.detail, event.redelivered]), file=file)  # fmt: skip
