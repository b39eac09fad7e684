"""
The scenarios: what each runs, how it ends, and the figures it reports.

Every run of a :class:`Case` against a :class:`Target` goes the same way:
receivers subscribe (and wait for their receipts), publishers connect, and
only then does the clock start; publishers stop at ``max_count`` messages or
after ``duration`` seconds, or when no receipt came for ``stall`` seconds;
the parent then waits until every message has arrived, or deliveries stall,
or ``drain`` seconds pass; and every process also has a hard deadline of its
own.  The result is one flat dict, printed as one JSON line.

Topic scenarios (``fanout``, ``selector-fanout``, ``ws-fanout``, ``latency``)
check that every subscriber got every ``seq`` exactly once; queue scenarios (``queue``,
``persistent``, ``queue-groups``, ``queue-priorities``) check that the consumers
together got every ``seq`` exactly once.  ``queue-groups`` is the ``queue``
scenario with each message in one of :data:`GROUPS` message groups
(``JMSXGroupID``), and ``queue-priorities`` with mixed priorities 0 to 9, so
that their figures stand next to the plain queue's (issue 16).
"""

from __future__ import annotations

import secrets
import time
from array import array
from typing import Any

from attrs import frozen

from benchmarks.connection import Endpoint, Link
from benchmarks.crew import Crew
from benchmarks.errors import BenchmarkError
from benchmarks.measure import (
    CpuSnapshot,
    cpu_between,
    merge_seen,
    percentiles,
    process_fd_count,
    process_fd_limit,
    process_rss_kb,
)
from benchmarks.streams import run_stream
from benchmarks.wire import SendTemplate
from benchmarks.workers import (
    IdleSpec,
    PublisherSpec,
    ReceiverSpec,
    Subscription,
    run_idle,
    run_publisher,
    run_receiver,
)

#: In the order a full run takes them: ``idle`` first, because a broker's
#: resident memory rarely shrinks, so growth per connection is only visible
#: on a broker that has not been busy yet.
SCENARIOS = (
    "idle",
    "fanout",
    "selector-fanout",
    "ws-fanout",
    "queue",
    "persistent",
    "queue-groups",
    "queue-priorities",
    "latency",
    "stream",
)
#: The scenarios of destination features, run only when named: ``stream`` is
#: stompbroker's own destination kind (other brokers' streams are reached otherwise).
FEATURE_SCENARIOS = frozenset({"selector-fanout", "queue-groups", "queue-priorities", "stream"})
#: What a run without named scenarios runs: the feature scenarios only on request.
DEFAULT_SCENARIOS = tuple(scenario for scenario in SCENARIOS if scenario not in FEATURE_SCENARIOS)
#: Scenarios across two nodes of the redis engine (publishers on one, receivers
#: on the other; :mod:`benchmarks.cluster` starts them): run only when named.
CLUSTER_SCENARIOS = ("cluster-fanout", "cluster-queue")
ACK_MODES = ("auto", "client", "client-individual")
TOPIC_SCENARIOS = frozenset({"fanout", "selector-fanout", "ws-fanout", "latency", "cluster-fanout"})
#: ``selector-fanout``: every other subscription carries this two-term selector,
#: and every message the headers that make it TRUE, so each subscriber still gets
#: every message (the exactly-once check holds) and the figure is ``fanout``'s
#: plus what evaluating the selectors costs.
SELECTOR: tuple[tuple[str, str], ...] = (("selector", "type = 'a' AND n > 3"),)
SELECTED_HEADERS: tuple[tuple[str, str], ...] = (("type", "a"), ("n", "5"))
QUEUE_SCENARIOS = frozenset(
    {"queue", "persistent", "queue-groups", "queue-priorities", "cluster-queue"}
)
#: How many message groups ``queue-groups`` spreads its messages over.
GROUPS = 100
#: The header that varies with ``seq`` in a scenario that has one (see SendTemplate).
VARYING: dict[str, tuple[str, str, int]] = {
    "queue-groups": ("JMSXGroupID", "g", GROUPS),
    "queue-priorities": ("priority", "", 10),
}
#: The figures each scenario is judged by, the headline first, and whether more is better.
HEADLINE: dict[str, tuple[tuple[str, bool], ...]] = {
    "fanout": (("deliveries_per_s", True),),
    "selector-fanout": (("deliveries_per_s", True),),
    "ws-fanout": (("deliveries_per_s", True),),
    "queue": (("msgs_per_s", True),),
    "persistent": (("msgs_per_s", True),),
    "queue-groups": (("msgs_per_s", True),),
    "queue-priorities": (("msgs_per_s", True),),
    "cluster-fanout": (("deliveries_per_s", True),),
    "cluster-queue": (("msgs_per_s", True),),
    "latency": (("p99_ms", False), ("p50_ms", False)),
    "idle": (("held", True), ("rss_per_conn_kb", False)),
    "stream": (("append_msgs_per_s", True), ("replay_msgs_per_s", True)),
}


@frozen
class Settings:
    """
    How hard and how long to push; the command line's options.

    :ivar size: body bytes per message.
    :ivar duration: seconds of publishing, at most.
    :ivar max_count: messages per run, at most (split among producers).
    :ivar receipt_every: a receipt every this many SENDs.
    :ivar window: receipts outstanding at most.
    :ivar stall: seconds without progress that end a run as stalled.
    :ivar drain: seconds to wait for deliveries once publishing ended.
    :ivar procs: receiver processes (at most one per connection).
    :ivar read_delay: seconds a receiver waits after short reads; 0 for none.
    :ivar rate: messages per second in the latency scenario.
    :ivar warmup: seconds at the start of the latency scenario left out of the figures.
    :ivar connections: connections the idle scenario opens.
    :ivar hold: seconds the idle scenario holds them before measuring.
    :ivar prefetch: ``prefetch-count`` and ``activemq.prefetchSize`` for consumers, if set.
    :ivar setup_timeout: bound on each step of setting up connections.
    """

    size: int = 117
    duration: float = 10.0
    max_count: int = 5_000_000
    receipt_every: int = 100
    window: int = 4
    stall: float = 5.0
    drain: float = 10.0
    procs: int = 2
    read_delay: float = 0.002
    rate: int = 10_000
    warmup: float = 1.0
    connections: int = 5000
    hold: float = 3.0
    prefetch: int | None = None
    setup_timeout: float = 20.0


@frozen
class Case:
    """
    One configuration of one scenario.

    :ivar scenario: one of :data:`SCENARIOS`.
    :ivar subscribers: topic subscribers (``fanout``, ``ws-fanout``, ``latency``).
    :ivar producers: queue producers.
    :ivar consumers: queue consumers.
    :ivar ack: the consumers' ack mode.
    """

    scenario: str
    subscribers: int = 1
    producers: int = 1
    consumers: int = 1
    ack: str = "auto"

    @property
    def label(self) -> str:
        """:returns: a short name for tables, e.g. ``queue 4x4 client-individual``."""
        if self.scenario in TOPIC_SCENARIOS:
            return f"{self.scenario} {self.subscribers} sub"
        if self.scenario in QUEUE_SCENARIOS:
            return f"{self.scenario} {self.producers}x{self.consumers} {self.ack}"
        return self.scenario


@frozen
class Target:
    """
    A broker under test.

    :ivar name: how tables and JSON lines call it (``stompbroker``, ``other``).
    :ivar endpoint: how to reach it.
    :ivar pid: its process id, for its CPU and memory, when known.
    :ivar publish_endpoint: where publishers connect, if not to ``endpoint``
        (the cluster scenarios: another node of the same broker).
    """

    name: str
    endpoint: Endpoint
    pid: int | None = None
    publish_endpoint: Endpoint | None = None


def run_case(case: Case, target: Target, settings: Settings) -> dict[str, Any]:
    """
    Run one case against one broker.

    :returns: the result, a flat dict; ``ok`` is true only when nothing was lost
        or duplicated, no ERROR came, and the run neither stalled nor timed out;
        ``skipped`` says why a case could not run against this broker at all.
    """
    result: dict[str, Any] = {
        "benchmark": "stomp",
        "scenario": case.scenario,
        "case": case.label,
        "target": target.name,
        "address": f"{target.endpoint.host}:{target.endpoint.port}",
        "size": settings.size,
    }
    if case.scenario == "ws-fanout":
        result["address"] = target.endpoint.ws_url
        if target.endpoint.ws_url is None:
            result.update(ok=False, skipped="no WebSocket endpoint for this broker (see --ws)")
            return result
    try:
        if case.scenario == "idle":
            result.update(_run_idle(target, settings))
        elif case.scenario == "stream":
            if target.name != "stompbroker":
                result.update(ok=False, skipped="/stream/ destinations are stompbroker's own")
                return result
            result.update(run_stream(target.endpoint, settings))
        else:
            result.update(_run_flow(case, target, settings))
    except BenchmarkError as error:
        result.update(ok=False, error=str(error))
    return result


def _flow_shape(case: Case, settings: Settings) -> dict[str, Any]:
    """The parameters of a publish-and-receive run that go into its result."""
    shape: dict[str, Any] = {"transport": "ws" if case.scenario == "ws-fanout" else "tcp"}
    if case.scenario in QUEUE_SCENARIOS:
        shape.update(producers=case.producers, consumers=case.consumers, ack=case.ack)
    else:
        shape["subscribers"] = case.subscribers
    if case.scenario == "persistent":
        # Every SEND asks for a receipt, with as many frames in flight as the flow setting allows.
        shape.update(receipt_every=1, window=settings.receipt_every * settings.window)
    else:
        shape.update(receipt_every=settings.receipt_every, window=settings.window)
    if case.scenario == "latency":
        shape["rate"] = settings.rate
    if case.scenario in VARYING:
        name, _, modulus = VARYING[case.scenario]
        shape["varying"] = f"{name} x{modulus}"
    return shape


def _run_flow(case: Case, target: Target, settings: Settings) -> dict[str, Any]:
    """Publishers, receivers, and the checks of a publish-and-receive scenario."""
    run_id = secrets.token_hex(4)
    queue = case.scenario in QUEUE_SCENARIOS
    timed = case.scenario == "latency"
    shape = _flow_shape(case, settings)
    destination = f"/{'queue' if queue else 'topic'}/bench.{case.scenario}.{run_id}"
    readers = case.consumers if queue else case.subscribers
    selecting = case.scenario == "selector-fanout"
    subscriptions = [
        Subscription(
            destination,
            f"{run_id}-{index}",
            case.ack if queue else "auto",
            SELECTOR if selecting and index % 2 else (),
        )
        for index in range(readers)
    ]
    procs = max(1, min(settings.procs, readers))
    producers = case.producers if queue else 1
    rate = settings.rate if timed else 0
    extra: tuple[tuple[str, str], ...] = ()
    if settings.prefetch:
        extra = (
            ("prefetch-count", str(settings.prefetch)),
            ("activemq.prefetchSize", str(settings.prefetch)),
        )
    websocket = case.scenario == "ws-fanout"
    started = time.monotonic()
    deadline = (
        started
        + 3 * settings.setup_timeout
        + settings.duration
        + 2 * settings.stall
        + settings.drain
    )
    with Crew() as crew:
        progress = crew.shared_counts(procs)
        receivers = [
            crew.start(
                run_receiver,
                ReceiverSpec(
                    target.endpoint,
                    websocket,
                    tuple(subscriptions[slot::procs]),
                    extra_headers=extra,
                    timed=timed,
                    ordered=not queue,
                    warmup_seq=int(settings.warmup * rate),
                    read_delay=0.0 if timed else settings.read_delay,
                    send_seen=queue,
                    slot=slot,
                    setup_timeout=settings.setup_timeout,
                    deadline=deadline,
                ),
                progress,
            )
            for slot in range(procs)
        ]
        _check_ready(crew.gather(receivers, started + 2 * settings.setup_timeout), "receiver")
        publishers = [
            crew.start(
                run_publisher,
                PublisherSpec(
                    target.publish_endpoint or target.endpoint,
                    websocket,
                    destination,
                    b"x" * settings.size,
                    extra_headers=_send_headers(case),
                    varying=VARYING.get(case.scenario),
                    first_seq=index,
                    stride=producers,
                    max_count=-(-settings.max_count // producers),
                    duration=settings.duration,
                    receipt_every=shape["receipt_every"],
                    window=shape["window"],
                    rate=rate,
                    stall=settings.stall,
                    setup_timeout=settings.setup_timeout,
                    deadline=deadline,
                ),
            )
            for index in range(producers)
        ]
        _check_ready(
            crew.gather(publishers, time.monotonic() + settings.setup_timeout), "publisher"
        )
        before = CpuSnapshot.take(time.monotonic(), target.pid)
        crew.tell(publishers + receivers, "go")
        published_reports = crew.gather(
            publishers, time.monotonic() + settings.duration + 2 * settings.stall + 5
        )
        sent = sum(report["sent"] for report in published_reports if report)
        expected = sent if queue else sent * readers
        drained = _drain(progress, expected, settings)
        after = CpuSnapshot.take(time.monotonic(), target.pid)
        crew.tell(receivers, "stop")
        received_reports = crew.gather(receivers, time.monotonic() + 15)
    figures = _flow_figures(
        published_reports, received_reports, sent, readers, queue, before, after, target.pid
    )
    figures.update(shape)
    figures["drain"] = drained
    if timed:
        latencies = array("q")
        for report in received_reports:
            if report and "latencies" in report:
                latencies.frombytes(report["latencies"])
        figures.update(percentiles(latencies))
        figures["latency_samples"] = len(latencies)
    return _judge(figures)


def _send_headers(case: Case) -> tuple[tuple[str, str], ...]:
    """:returns: the headers a scenario's publishers add to every SEND."""
    if case.scenario == "persistent":
        return (("persistent", "true"),)
    if case.scenario == "selector-fanout":
        return SELECTED_HEADERS
    return ()


def _check_ready(answers: list[dict[str, Any] | None], role: str) -> None:
    """:raises BenchmarkError: when a worker failed to set up, naming the first failure."""
    for answer in answers:
        if answer is None:
            raise BenchmarkError(f"a {role} did not get ready in time")
        if "error" in answer:
            raise BenchmarkError(f"{role}: {answer['error']}")


def _drain(progress: Any, expected: int, settings: Settings) -> str:
    """
    Wait until the receivers have counted ``expected`` messages.

    :returns: ``complete``, ``stalled`` (no progress for ``stall`` seconds) or
        ``timed out`` (``drain`` seconds passed).
    """
    start = last_change = time.monotonic()
    last_total = -1
    while True:
        total = sum(progress)
        now = time.monotonic()
        if total >= expected:
            return "complete"
        if total != last_total:
            last_total, last_change = total, now
        elif now - last_change > settings.stall:
            return "stalled"
        if now - start > settings.drain:
            return "timed out"
        time.sleep(0.01)


def _flow_figures(
    published: list[dict[str, Any] | None],
    received: list[dict[str, Any] | None],
    sent: int,
    readers: int,
    queue: bool,
    before: CpuSnapshot,
    after: CpuSnapshot,
    pid: int | None,
) -> dict[str, Any]:
    """Turn the workers' reports into the result's figures."""
    publisher_reports = [report for report in published if report]
    receiver_reports = [report for report in received if report]
    connections = [conn for report in receiver_reports for conn in report["connections"]]
    errors = [report["error"] for report in publisher_reports if report.get("error")]
    errors += [conn["error"] for conn in connections if conn["error"]]
    errors += [report["closed"] for report in receiver_reports if report.get("closed")]
    if len(publisher_reports) < len(published) or len(receiver_reports) < len(received):
        errors.append("a worker did not report")
    start_ns = min((report["first_ns"] for report in publisher_reports), default=0)
    last_receipt_ns = max((report["last_receipt_ns"] for report in publisher_reports), default=0)
    last_delivery_ns = max((report["last_ns"] for report in receiver_reports), default=0)
    confirmed = sum(report["confirmed"] for report in publisher_reports)
    duplicated = sum(conn["duplicated"] for conn in connections)
    if queue:
        distinct, overlapping = merge_seen(
            seen for report in receiver_reports for seen in report["seen"]
        )
        duplicated += overlapping
        lost = sent - distinct
        delivered = distinct
    else:
        lost = sum(max(0, sent - conn["unique"]) for conn in connections)
        lost += sent * (readers - len(connections))
        delivered = sum(conn["unique"] for conn in connections)
    figures: dict[str, Any] = {
        "published": sent,
        "confirmed": confirmed,
        "publish_per_s": _rate(confirmed, start_ns, last_receipt_ns),
        "delivered": delivered,
        "lost": lost,
        "duplicated": duplicated,
        "foreign": sum(conn["foreign"] for conn in connections),
        "elapsed_s": round(max(0, last_delivery_ns - start_ns) / 1e9, 3),
        "stalled": any(report["stalled"] for report in publisher_reports),
        "timed_out": any(report["timed_out"] for report in receiver_reports),
        "error": "; ".join(dict.fromkeys(errors)) or None,
    }
    if queue:
        figures["msgs_per_s"] = _rate(delivered, start_ns, last_delivery_ns)
        figures["per_consumer"] = [conn["received"] for conn in connections]
    else:
        figures["deliveries_per_s"] = _rate(delivered, start_ns, last_delivery_ns)
        figures["out_of_order"] = sum(conn["out_of_order"] for conn in connections)
        figures["complete_subscribers"] = sum(
            1 for conn in connections if conn["unique"] == sent and not conn["duplicated"]
        )
    cpu_seconds = sum(report["cpu_s"] for report in publisher_reports + receiver_reports)
    figures["gen_cpu_pct"] = round(cpu_seconds / max(after.wall - before.wall, 1e-9) * 100, 1)
    figures.update(cpu_between(before, after))
    figures["broker_rss_kb"] = process_rss_kb(pid) if pid else None
    return figures


def _rate(count: int, start_ns: int, end_ns: int) -> float:
    """:returns: ``count`` per second between two ``monotonic_ns`` stamps, 0 when undefined."""
    if count <= 0 or end_ns <= start_ns:
        return 0.0
    return round(count / ((end_ns - start_ns) / 1e9), 1)


def _judge(figures: dict[str, Any]) -> dict[str, Any]:
    """Set ``ok``: the run published, lost and duplicated nothing, and ended cleanly."""
    figures["ok"] = bool(
        figures.get("published")
        and not figures.get("lost")
        and not figures.get("duplicated")
        and not figures.get("stalled")
        and not figures.get("timed_out")
        and figures.get("drain", "complete") == "complete"
        and not figures.get("error")
    )
    return figures


#: The share of a broker's free file descriptors the idle scenario may use.
FD_HEADROOM = 0.8


def fd_headroom(pid: int) -> int | None:
    """:returns: how many connections the idle scenario may open to the broker ``pid``, if known."""
    limit = process_fd_limit(pid)
    used = process_fd_count(pid)
    if limit is None or used is None:
        return None
    return max(0, int((limit - used) * FD_HEADROOM))


def _run_idle(target: Target, settings: Settings) -> dict[str, Any]:
    """
    Open ``settings.connections`` subscribed connections, hold them, measure the broker, probe them.

    Every connection subscribes to one topic; after the hold, one message sent
    there must reach each of them: a connection counts as held only if it does.
    When the broker's pid is known, the run opens no more connections than
    :data:`FD_HEADROOM` of the file descriptors it has free (and says so in
    ``capped_to``): some brokers do not survive running out (RabbitMQ 3.10 loses
    its memory monitor), and would then spoil every later run.  The connection
    that sends the probe is opened first, so that the probe cannot be the one
    connection too many.
    """
    run_id = secrets.token_hex(4)
    destination = f"/topic/bench.idle.{run_id}"
    pid = target.pid
    requested = settings.connections
    capped_to = fd_headroom(pid) if pid else None
    if capped_to is not None and capped_to < requested:
        requested = capped_to
    else:
        capped_to = None
    procs = max(1, min(settings.procs, requested))
    shares = [requested // procs + (1 if slot < requested % procs else 0) for slot in range(procs)]
    rss_before = process_rss_kb(pid) if pid else None
    probe = Link(target.endpoint, timeout=settings.setup_timeout)
    started = time.monotonic()
    setup_bound = settings.setup_timeout + requested * 0.01
    deadline = started + 2 * setup_bound + settings.hold + 30
    errors: list[str] = []
    with probe, Crew() as crew:
        progress = crew.shared_counts(procs)
        holders = [
            crew.start(
                run_idle,
                IdleSpec(
                    target.endpoint,
                    shares[slot],
                    destination,
                    slot=slot,
                    setup_timeout=settings.setup_timeout,
                    deadline=deadline,
                ),
                progress,
            )
            for slot in range(procs)
        ]
        ready = [answer or {} for answer in crew.gather(holders, started + setup_bound)]
        opened = sum(answer.get("ready", 0) for answer in ready)
        setup_s = time.monotonic() - started
        time.sleep(settings.hold)
        rss_held = process_rss_kb(pid) if pid else None
        fds = process_fd_count(pid) if pid else None
        try:
            probe.sock.sendall(
                probe.pack(SendTemplate(destination, b"probe").frames(range(1), True))
            )
            probe.read_frames(1, settings.setup_timeout)
        except (BenchmarkError, OSError) as error:
            errors.append(f"probe: {error}")
        crew.tell(holders, "probe")
        held_reports = crew.gather(holders, time.monotonic() + settings.setup_timeout)
    errors += [answer["error"] for answer in ready if answer.get("error")]
    if len([answer for answer in ready if answer]) < len(holders):
        errors.append("a connection holder did not get ready in time")
    held = sum(report["held"] for report in held_reports if report)
    figures: dict[str, Any] = {
        "requested": settings.connections,
        "capped_to": capped_to,
        "hold_s": settings.hold,
        "opened": opened,
        "held": held,
        "failures": sum(answer.get("failures", 0) for answer in ready),
        "setup_s": round(setup_s, 3),
        "connections_per_s": round(opened / setup_s, 1) if setup_s else 0.0,
        "generator_fd_limit": min((answer.get("fd_limit", 0) for answer in ready), default=0),
        "rss_before_kb": rss_before,
        "rss_held_kb": rss_held,
        "broker_fds": fds,
        "error": "; ".join(dict.fromkeys(errors)) or None,
    }
    if rss_before is not None and rss_held is not None and opened:
        figures["rss_per_conn_kb"] = round((rss_held - rss_before) / opened, 2)
    figures["ok"] = held == requested and not figures["error"]
    return figures
