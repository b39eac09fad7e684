"""
The ``idle`` scenario: many subscribed connections held open, the broker's
memory and file descriptors measured, then a probe that each must receive.

Both sides are here: :func:`run_idle_scenario` in the parent, and
:func:`run_idle`, the body of each child process that opens and holds a share of
the connections (it talks to the parent as :mod:`benchmarks.workers` says).
Apart from the publish-and-receive scenarios (:mod:`benchmarks.scenarios`) and
their workers because it shares none of their flow: no publishers, no receipts,
no counting of deliveries.
"""

from __future__ import annotations

import secrets
import selectors
import time
from multiprocessing.connection import Connection
from typing import Any

from attrs import frozen

from benchmarks.cases import Settings, Target
from benchmarks.connection import Endpoint, Link
from benchmarks.crew import Crew
from benchmarks.errors import BenchmarkError
from benchmarks.measure import (
    own_cpu_seconds,
    process_fd_count,
    process_fd_limit,
    process_rss_kb,
)
from benchmarks.wire import Inbox, SendTemplate, subscribe_frame
from benchmarks.workers import await_parent, raise_fd_limit, tell_parent

__all__ = ["FD_HEADROOM", "IdleSpec", "fd_headroom", "run_idle", "run_idle_scenario"]

#: The share of a broker's free file descriptors the idle scenario may use.
FD_HEADROOM = 0.8


def fd_headroom(pid: int) -> int | None:
    """:returns: how many connections the idle scenario may open to the broker ``pid``, if known."""
    limit = process_fd_limit(pid)
    used = process_fd_count(pid)
    if limit is None or used is None:
        return None
    return max(0, int((limit - used) * FD_HEADROOM))


def run_idle_scenario(target: Target, settings: Settings) -> dict[str, Any]:
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


# -- the holders of the connections (child processes) ----------------------------


@frozen
class IdleSpec:
    """
    What one process holding idle connections does.

    :ivar endpoint: the broker.
    :ivar count: connections to open, each with one subscription.
    :ivar destination: what they all subscribe to.
    :ivar batch: connections set up per round trip; under the broker's listen
        backlog (Twisted's default is 50), or the kernel drops SYNs and connect
        waits a second for the retry.
    :ivar slot: this process's index in the shared progress array.
    :ivar setup_timeout: bound on each step of the set-up.
    :ivar deadline: ``time.monotonic()`` by which the process ends, whatever happens.
    """

    endpoint: Endpoint
    count: int
    destination: str
    batch: int = 32
    slot: int = 0
    setup_timeout: float = 10.0
    deadline: float = 0.0


def run_idle(spec: IdleSpec, pipe: Connection, progress: Any) -> None:
    """
    Open and subscribe ``spec.count`` connections, hold them, and check they still deliver.

    Connections are set up a batch at a time, each batch within one
    ``setup_timeout``, and the process gives up once more than 1% of them (at
    least 10) have failed: a broker out of file descriptors stops accepting,
    and waiting out every connect would take minutes.

    :param spec: the process's work.
    :param pipe: to the parent.
    :param progress: shared array: how many connections this process has subscribed.
    """
    limit = raise_fd_limit()
    links: list[Link] = []
    failures: list[str] = []
    cpu_before = own_cpu_seconds()
    for batch_start in range(0, spec.count, spec.batch):
        if time.monotonic() > spec.deadline or len(failures) > max(10, spec.count // 100):
            break
        size = min(spec.batch, spec.count - batch_start)
        links += _open_batch(spec, size, time.monotonic() + spec.setup_timeout, failures)
        progress[spec.slot] = len(links)
    tell_parent(
        pipe,
        {
            "ready": len(links),
            "failures": len(failures),
            "error": failures[0] if failures else None,
            "fd_limit": limit,
            "setup_cpu_s": own_cpu_seconds() - cpu_before,
        },
    )
    if await_parent(pipe, spec.deadline) == "probe":
        held = _count_probed(links, spec.deadline)
        tell_parent(pipe, {"held": held})
    for link in links:
        link.close()


def _open_batch(spec: IdleSpec, size: int, deadline: float, failures: list[str]) -> list[Link]:
    """
    Set up ``size`` subscribed connections in three round trips: connect and
    CONNECT all, then SUBSCRIBE all, then read all the receipts.

    :param deadline: ``time.monotonic()`` by which the whole batch must be set up.
    :param failures: what went wrong is appended here, one entry per failed connection.
    :returns: the connections that are subscribed.
    """

    def remaining() -> float:
        return max(0.1, deadline - time.monotonic())

    opened: list[Link] = []
    for _ in range(size):
        try:
            opened.append(Link(spec.endpoint, timeout=remaining(), wait=False))
        except BenchmarkError as error:
            failures.append(str(error))
    subscribed = []
    for index, link in enumerate(opened):
        try:
            link.expect_connected(remaining())
            link.sock.sendall(subscribe_frame(spec.destination, f"idle-{index}", "auto"))
            subscribed.append(link)
        except (BenchmarkError, OSError) as error:
            failures.append(str(error))
            link.close()
    ready = []
    for link in subscribed:
        try:
            link.read_frames(1, remaining())
            ready.append(link)
        except BenchmarkError as error:
            failures.append(str(error))
            link.close()
    return ready


def _count_probed(links: list[Link], deadline: float) -> int:
    """:returns: how many of ``links`` received a MESSAGE before ``deadline``."""
    selector = selectors.DefaultSelector()
    inboxes = []
    for link in links:
        inbox = Inbox()
        inbox.receive(link.buffered())
        inboxes.append(inbox)
        if not inbox.received:
            link.sock.settimeout(1.0)
            selector.register(link.sock, selectors.EVENT_READ, inbox)
    with selector:
        while selector.get_map() and time.monotonic() < deadline:
            for key, _ in selector.select(min(0.2, max(0.0, deadline - time.monotonic()))):
                sock, inbox = key.fileobj, key.data
                try:
                    data = sock.recv(65536)  # type: ignore[union-attr]
                except OSError:
                    data = b""
                inbox.receive(data)
                if inbox.received or not data:
                    selector.unregister(sock)
    return sum(1 for inbox in inboxes if inbox.received)
