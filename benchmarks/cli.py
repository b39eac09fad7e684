"""
``python -m benchmarks``: the scenarios, against stompbroker and optionally another broker.

Without ``--target`` the suite starts stompbroker itself (``twistd -n
stompbroker`` on a free loopback port) and stops it at the end; with
``--compare HOST:PORT`` every run against stompbroker is followed by the same
run against the other broker, and a table of ratios closes the output.
Progress goes to stderr; stdout gets one JSON line per run and then the tables.
``python -m benchmarks faults ...`` is the cluster's fault harness instead
(:mod:`benchmarks.faults`).
The exit status is 0 when every run was ok.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.cases import (
    ACK_MODES,
    CLUSTER_SCENARIOS,
    DEFAULT_SCENARIOS,
    SCENARIOS,
    Case,
    Settings,
    Target,
)
from benchmarks.cluster import cluster_target
from benchmarks.connection import Endpoint, parse_address
from benchmarks.launcher import DEFAULT_REACTOR, BrokerProcess
from benchmarks.report import json_line, print_ratios, print_table
from benchmarks.scenarios import run_case

#: ``--flow`` presets: (receipt every, window).  ``deep`` keeps up to 400 frames
#: in flight per publisher; ``shallow`` keeps 8, which some brokers need.
FLOWS = {"deep": (100, 4), "shallow": (8, 1)}
OURS = "stompbroker"


def _scenario(text: str) -> str:
    if text not in SCENARIOS + CLUSTER_SCENARIOS:
        raise argparse.ArgumentTypeError(
            f"scenarios are {', '.join(SCENARIOS + CLUSTER_SCENARIOS)}; got {text!r}"
        )
    return text


def _counts(text: str) -> list[int]:
    values = [int(part) for part in text.split(",") if part]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive integers separated by commas, got {text!r}"
        )
    return values


def _ack_modes(text: str) -> list[str]:
    modes = [part for part in text.split(",") if part]
    unknown = [mode for mode in modes if mode not in ACK_MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"ack modes are {', '.join(ACK_MODES)}; got {text!r}")
    return modes


def _address(text: str) -> tuple[str, int]:
    try:
        return parse_address(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    """:returns: the command line's parser."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="STOMP broker benchmarks: throughput, latency and memory, "
        "checked for loss and duplication.",
        epilog="See docs/performance.md for what each scenario measures.",
    )
    parser.add_argument(
        "scenarios",
        nargs="*",
        type=_scenario,
        metavar="SCENARIO",
        help=f"scenarios to run, of {', '.join(SCENARIOS)} (default: all but the feature"
        " scenarios selector-fanout, queue-selectors, queue-groups, queue-priorities and"
        " stream),"
        f" and {', '.join(CLUSTER_SCENARIOS)} (across two nodes of the redis engine, which"
        " the suite starts with a redis-server; only when named)",
    )
    brokers = parser.add_argument_group("brokers")
    brokers.add_argument(
        "--target",
        type=_address,
        metavar="HOST:PORT",
        help="stompbroker to measure (default: start one)",
    )
    brokers.add_argument("--pid", type=int, help="its process id, for CPU and memory figures")
    brokers.add_argument(
        "--ws", metavar="URL", help="its STOMP-over-WebSocket endpoint, ws://HOST:PORT/PATH"
    )
    brokers.add_argument(
        "--compare",
        type=_address,
        metavar="HOST:PORT",
        help="another broker to run every case against",
    )
    brokers.add_argument(
        "--compare-pid", type=int, metavar="PID", help="the other broker's process id"
    )
    brokers.add_argument(
        "--compare-ws", metavar="URL", help="the other broker's WebSocket endpoint"
    )
    brokers.add_argument(
        "--compare-name", default="other", help="what to call it in the output (default: other)"
    )
    brokers.add_argument("--login", help="CONNECT login, for every broker")
    brokers.add_argument("--passcode", help="CONNECT passcode")
    brokers.add_argument("--vhost", default="/", help="CONNECT host header (default: /)")
    brokers.add_argument(
        "--broker-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra option for the stompbroker the suite starts (repeatable)",
    )
    brokers.add_argument(
        "--reactor",
        default=DEFAULT_REACTOR,
        help="twistd reactor for the stompbroker the suite starts, as the README runs it"
        " (default: uvloop; also epoll, asyncio)",
    )
    shape = parser.add_argument_group("load")
    shape.add_argument("--size", type=int, default=117, help="body bytes (default: 117)")
    shape.add_argument(
        "--subscribers",
        type=_counts,
        default=[10, 75],
        metavar="N[,N...]",
        help="fanout and selector-fanout subscriber counts (default: 10,75)",
    )
    shape.add_argument(
        "--ws-subscribers",
        type=_counts,
        default=[10],
        metavar="N[,N...]",
        help="WebSocket fan-out subscriber counts (default: 10)",
    )
    shape.add_argument("--producers", type=int, default=4, help="queue producers (default: 4)")
    shape.add_argument("--consumers", type=int, default=4, help="queue consumers (default: 4)")
    shape.add_argument(
        "--ack",
        type=_ack_modes,
        default=list(ACK_MODES),
        metavar="MODE[,MODE...]",
        help="queue ack modes (default: all three)",
    )
    shape.add_argument(
        "--rate",
        type=int,
        default=10_000,
        help="latency scenario: messages per second (default: 10000)",
    )
    shape.add_argument(
        "--warmup",
        type=float,
        default=1.0,
        help="latency scenario: seconds left out at the start (default: 1)",
    )
    shape.add_argument(
        "--connections", type=int, default=5000, help="idle scenario: connections (default: 5000)"
    )
    shape.add_argument(
        "--hold", type=float, default=3.0, help="idle scenario: seconds to hold them (default: 3)"
    )
    shape.add_argument(
        "--prefetch",
        type=int,
        help="consumers' prefetch-count / activemq.prefetchSize (default: the broker's)",
    )
    flow = parser.add_argument_group("flow control and bounds")
    flow.add_argument(
        "--flow",
        choices=sorted(FLOWS),
        default="deep",
        help="deep: receipt every 100 SENDs, 4 outstanding; shallow: every 8, 1 outstanding",
    )
    flow.add_argument("--receipt-every", type=int, help="override the flow's receipt interval")
    flow.add_argument("--window", type=int, help="override the flow's outstanding receipts")
    flow.add_argument(
        "--duration",
        type=float,
        default=10.0,
        help="seconds of publishing per run, at most (default: 10)",
    )
    flow.add_argument(
        "--count", type=int, default=5_000_000, help="messages per run, at most (default: 5000000)"
    )
    flow.add_argument(
        "--stall",
        type=float,
        default=5.0,
        help="seconds without progress that end a run (default: 5)",
    )
    flow.add_argument(
        "--drain",
        type=float,
        default=10.0,
        help="seconds to wait for deliveries after publishing (default: 10)",
    )
    flow.add_argument(
        "--repeat", type=int, default=1, help="runs of each case per broker (default: 1)"
    )
    generator = parser.add_argument_group("generator")
    generator.add_argument(
        "--procs",
        type=int,
        default=os.cpu_count() or 2,
        help="receiver processes (default: one per CPU)",
    )
    generator.add_argument(
        "--read-delay",
        type=float,
        default=2.0,
        metavar="MS",
        help="ms a receiver waits after short reads, to read more at once "
        "(default: 2; 0 in the latency scenario)",
    )
    generator.add_argument(
        "--json-out", type=Path, metavar="FILE", help="also append the JSON lines to FILE"
    )
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    """:returns: the :class:`Settings` the options describe."""
    receipt_every, window = FLOWS[args.flow]
    return Settings(
        size=args.size,
        duration=args.duration,
        max_count=args.count,
        receipt_every=args.receipt_every or receipt_every,
        window=args.window or window,
        stall=args.stall,
        drain=args.drain,
        procs=max(1, args.procs),
        read_delay=args.read_delay / 1000.0,
        rate=args.rate,
        warmup=args.warmup,
        connections=args.connections,
        hold=args.hold,
        prefetch=args.prefetch,
    )


def cases_from(args: argparse.Namespace) -> list[Case]:
    """:returns: every case the options ask for, in the order they run."""
    cases = []
    for scenario in args.scenarios or DEFAULT_SCENARIOS:
        if scenario in ("fanout", "selector-fanout", "cluster-fanout"):
            cases += [Case(scenario, subscribers=count) for count in args.subscribers]
        elif scenario == "ws-fanout":
            cases += [Case("ws-fanout", subscribers=count) for count in args.ws_subscribers]
        elif scenario in ("queue", "cluster-queue"):
            cases += [
                Case(scenario, producers=args.producers, consumers=args.consumers, ack=mode)
                for mode in args.ack
            ]
        elif scenario in (
            "persistent",
            "queue-selectors",
            "queue-groups",
            "queue-priorities",
            "cluster-queue-selectors",
            "cluster-queue-groups",
            "cluster-queue-priorities",
        ):
            cases += [
                Case(scenario, producers=args.producers, consumers=args.consumers, ack=mode)
                for mode in args.ack
            ]
        elif scenario == "latency":
            cases.append(Case("latency"))
        else:
            cases.append(Case(scenario))
    return list(dict.fromkeys(cases))


@contextlib.contextmanager
def our_target(args: argparse.Namespace, workdir: Path) -> Iterator[Target]:
    """
    Yield stompbroker as a :class:`Target`: the one given, or one started for the run.

    :param workdir: a started broker's working directory, of its own, where it logs.
    """
    credentials: dict[str, Any] = {
        "login": args.login,
        "passcode": args.passcode,
        "vhost": args.vhost,
    }
    if args.target:
        host, port = args.target
        yield Target(OURS, Endpoint(host, port, args.ws, **credentials), args.pid)
        return
    broker = BrokerProcess(workdir, *args.broker_arg, reactor=args.reactor)
    try:
        print(
            f"# started stompbroker on 127.0.0.1:{broker.port}"
            f" (pid {broker.pid}, log {broker.log_path})",
            file=sys.stderr,
        )
        yield Target(
            OURS,
            Endpoint("127.0.0.1", broker.port, args.ws or broker.ws_url, **credentials),
            broker.pid,
        )
    finally:
        broker.stop()


class Runner:
    """
    Runs cases, prints each result's JSON line as it comes, and keeps the results.

    :param args: the parsed command line.
    :param settings: the load settings.
    :param workdir: where brokers the suite starts write their logs.
    """

    def __init__(self, args: argparse.Namespace, settings: Settings, workdir: Path) -> None:
        self.args = args
        self.settings = settings
        self.workdir = workdir
        self.results: list[dict[str, Any]] = []
        self._json_out = open(args.json_out, "a") if args.json_out else None
        self._fresh = 0

    def run(self, case: Case, target: Target, repeat: int) -> None:
        """
        Run one case against one broker and record the result.

        The idle scenario measures the broker's memory growth, which a broker
        that has already been busy hides (freed memory is reused, not returned),
        so when the suite started stompbroker itself, each idle run gets a
        freshly started one.
        """
        print(
            f"# {case.label} on {target.name} (run {repeat + 1} of {self.args.repeat})",
            file=sys.stderr,
        )
        if case.scenario == "idle" and target.name == OURS and not self.args.target:
            self._fresh += 1
            with our_target(self.args, self.workdir / f"idle-{self._fresh}") as fresh:
                result = run_case(case, fresh, self.settings)
        else:
            result = run_case(case, target, self.settings)
        result["repeat"] = repeat
        result["at"] = round(time.time(), 3)
        line = json_line(result)
        print(line, flush=True)
        if self._json_out:
            print(line, file=self._json_out, flush=True)
        self.results.append(result)

    def close(self) -> None:
        """Close the JSON output file."""
        if self._json_out:
            self._json_out.close()


def _run_all(runner: Runner, cases: list[Case], targets: list[Target], repeat: int) -> None:
    for case in cases:
        for run in range(repeat):
            for target in targets:
                runner.run(case, target, run)


def main(argv: list[str]) -> int:
    """
    Run the suite.

    :param argv: the command line, without the program name.
    :returns: the exit status: 0 when every run that was not skipped was ok,
        1 otherwise, 2 for bad options, 130 when interrupted by Ctrl-C.
    """
    if argv[:1] == ["faults"]:
        from benchmarks.faults.run import main as faults

        return faults(argv[1:])
    args = build_parser().parse_args(argv)
    cases = cases_from(args)
    single = [case for case in cases if case.scenario not in CLUSTER_SCENARIOS]
    across = [case for case in cases if case.scenario in CLUSTER_SCENARIOS]
    with tempfile.TemporaryDirectory(prefix="stompbench-") as workdir:
        runner = Runner(args, settings_from(args), Path(workdir))
        try:
            if single:
                with our_target(args, Path(workdir) / "main") as ours:
                    targets = [ours]
                    if args.compare:
                        host, port = args.compare
                        endpoint = Endpoint(
                            host, port, args.compare_ws, args.login, args.passcode, args.vhost
                        )
                        targets.append(Target(args.compare_name, endpoint, args.compare_pid))
                    _run_all(runner, single, targets, args.repeat)
            if across:
                credentials = {"login": args.login, "passcode": args.passcode, "vhost": args.vhost}
                with cluster_target(
                    Path(workdir) / "cluster", args.broker_arg, args.reactor, credentials
                ) as cluster:
                    _run_all(runner, across, [cluster], args.repeat)
        except KeyboardInterrupt:
            print("# interrupted: the tables show the runs that finished", file=sys.stderr)
            interrupted = True
        else:
            interrupted = False
        finally:
            runner.close()
    results = runner.results
    print()
    print_table(results, sys.stdout)
    if args.compare:
        print()
        print_ratios(results, OURS, args.compare_name, sys.stdout)
    if interrupted:
        return 130
    return 0 if all(result.get("ok") for result in results if not result.get("skipped")) else 1
