"""
The scenarios: what each runs, how it ends, and the figures it reports.

Every run of a :class:`~benchmarks.cases.Case` against a
:class:`~benchmarks.cases.Target` goes the same way:
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

from benchmarks.cases import (
    QUEUE_SCENARIOS,
    SELECTED_HEADERS,
    SELECTING_QUEUE_SCENARIOS,
    SELECTOR,
    VARYING,
    Case,
    Settings,
    Target,
)
from benchmarks.crew import Crew
from benchmarks.errors import BenchmarkError
from benchmarks.idle import run_idle_scenario
from benchmarks.measure import (
    CpuSnapshot,
    cpu_between,
    merge_seen,
    percentiles,
    process_rss_kb,
)
from benchmarks.streams import run_stream
from benchmarks.workers import (
    PublisherSpec,
    ReceiverSpec,
    Subscription,
    run_publisher,
    run_receiver,
)


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
            result.update(run_idle_scenario(target, settings))
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
    selecting = case.scenario == "selector-fanout" or case.scenario in SELECTING_QUEUE_SCENARIOS
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
    if case.scenario == "selector-fanout" or case.scenario in SELECTING_QUEUE_SCENARIOS:
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
