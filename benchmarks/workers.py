"""
The load generator's processes: publishers and receivers (the holders of idle
connections are :mod:`benchmarks.idle`, with their scenario).

Each function here is the body of one child process.  It talks to the
scenario in the parent over a pipe, in small dicts:

1. it sets up its connections and sends ``{"ready": ...}`` (or ``{"error": ...}``);
2. it waits for ``"go"`` (receivers and publishers) or ``"probe"`` (idle);
3. it runs until its work is done, the parent says ``"stop"``, or its own
   deadline passes, whichever comes first, so no loop depends on anyone else to end;
4. it sends one report, with the CPU seconds it used between "go" and the end.

Receivers also publish how many messages they have counted in a shared array
(one slot per process), so that the parent can tell when every message has
arrived, and when deliveries have stalled, without a round trip.
"""

from __future__ import annotations

import resource
import selectors
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from attrs import frozen

from benchmarks.connection import Endpoint, Link
from benchmarks.errors import BenchmarkError
from benchmarks.measure import own_cpu_seconds
from benchmarks.wire import Headers, Inbox, SendTemplate, Varying

#: A read shorter than this means the broker is writing in dribs and drabs.
SMALL_READ = 16384
READ_SIZE = 1 << 18


@frozen
class Subscription:
    """
    One subscription a receiver opens, on a connection of its own.

    :ivar destination: what to subscribe to.
    :ivar subscription_id: the SUBSCRIBE ``id``.
    :ivar ack_mode: ``auto``, ``client`` or ``client-individual``.
    :ivar headers: more SUBSCRIBE headers for this subscription alone (a ``selector``).
    """

    destination: str
    subscription_id: str
    ack_mode: str = "auto"
    headers: Headers = ()


@frozen
class ReceiverSpec:
    """
    What one receiver process does.

    :ivar endpoint: the broker.
    :ivar websocket: connect over WebSocket instead of TCP.
    :ivar subscriptions: one connection each.
    :ivar extra_headers: added to every SUBSCRIBE (prefetch settings).
    :ivar timed: record latencies from the ``ts`` header.
    :ivar ordered: one publisher, so messages should come in ``seq`` order (topics).
    :ivar warmup_seq: with ``timed``, frames below this ``seq`` are not timed.
    :ivar read_delay: seconds to wait after a round of short reads, so that the
        next read takes in more; 0 reads as soon as anything arrives.
    :ivar send_seen: include each connection's seen-map in the report.
    :ivar slot: this process's index in the shared progress array.
    :ivar setup_timeout: bound on each step of the set-up.
    :ivar deadline: ``time.monotonic()`` by which the process ends, whatever happens.
    """

    endpoint: Endpoint
    websocket: bool
    subscriptions: tuple[Subscription, ...]
    extra_headers: Headers = ()
    timed: bool = False
    ordered: bool = False
    warmup_seq: int = 0
    read_delay: float = 0.0
    send_seen: bool = False
    slot: int = 0
    setup_timeout: float = 10.0
    deadline: float = 0.0


@frozen
class PublisherSpec:
    """
    What one publisher process does.

    :ivar endpoint: the broker.
    :ivar websocket: connect over WebSocket instead of TCP.
    :ivar destination: where to send.
    :ivar body: every message's payload.
    :ivar extra_headers: headers on every SEND (``persistent:true``).
    :ivar varying: a header whose value varies with ``seq`` (message groups,
        priorities; see :class:`~benchmarks.wire.SendTemplate`), or ``None``.
    :ivar first_seq: this publisher's first ``seq``; with ``stride`` publishers
        interleave, so every ``seq`` of a run is unique.
    :ivar stride: the number of publishers.
    :ivar max_count: the most messages this publisher sends.
    :ivar duration: the most seconds it publishes.
    :ivar receipt_every: a receipt is asked for on every this-many-th SEND.
    :ivar window: the most receipts outstanding; with ``receipt_every`` it
        bounds the frames in flight.
    :ivar rate: messages per second, paced, each with the time of writing in a
        ``ts`` header; 0 sends as fast as the window allows, without ``ts``.
    :ivar stall: seconds without a receipt (while waiting for one) that end the run.
    :ivar setup_timeout: bound on connecting.
    :ivar deadline: ``time.monotonic()`` by which the process ends, whatever happens.
    """

    endpoint: Endpoint
    websocket: bool
    destination: str
    body: bytes
    extra_headers: Headers = ()
    varying: Varying | None = None
    first_seq: int = 0
    stride: int = 1
    max_count: int = 1000
    duration: float = 1.0
    receipt_every: int = 100
    window: int = 4
    rate: int = 0
    stall: float = 5.0
    setup_timeout: float = 10.0
    deadline: float = 0.0


def await_parent(pipe: Connection, deadline: float) -> Any | None:
    """:returns: the parent's next message; ``None`` if none comes by ``deadline``, or no parent."""
    try:
        if pipe.poll(max(0.0, deadline - time.monotonic())):
            return pipe.recv()
    except (EOFError, OSError):
        return None
    return None


def tell_parent(pipe: Connection, message: dict[str, Any]) -> None:
    try:
        pipe.send(message)
    except (BrokenPipeError, OSError):
        # The parent gave up on us; there is nobody left to tell.
        return


def raise_fd_limit() -> int:
    """
    Raise this process's soft limit on open files to its hard limit.

    :returns: the limit now in force.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# -- receivers ------------------------------------------------------------------


def run_receiver(spec: ReceiverSpec, pipe: Connection, progress: Any) -> None:
    """
    Subscribe, then count what arrives until told to stop.

    :param spec: the process's work.
    :param pipe: to the parent.
    :param progress: shared array of counts, one slot per receiver process.
    """
    raise_fd_limit()
    links: list[Link] = []
    try:
        for subscription in spec.subscriptions:
            link = Link(spec.endpoint, spec.websocket, spec.setup_timeout)
            links.append(link)
            link.subscribe(
                subscription.destination,
                subscription.subscription_id,
                subscription.ack_mode,
                spec.setup_timeout,
                spec.extra_headers + subscription.headers,
            )
    except BenchmarkError as error:
        for link in links:
            link.close()
        tell_parent(pipe, {"error": str(error)})
        return
    tell_parent(pipe, {"ready": len(links)})
    if await_parent(pipe, spec.deadline) != "go":
        for link in links:
            link.close()
        return
    inboxes = []
    for link, subscription in zip(links, spec.subscriptions, strict=True):
        inbox = Inbox(
            link.version,
            subscription.subscription_id,
            subscription.ack_mode,
            spec.warmup_seq,
            spec.timed,
            spec.ordered,
        )
        inbox.receive(link.buffered(), time.monotonic_ns())
        inboxes.append(inbox)
    cpu_before = own_cpu_seconds()
    report = _receive(spec, pipe, progress, links, inboxes)
    report["cpu_s"] = own_cpu_seconds() - cpu_before
    report["connections"] = [
        {
            "received": inbox.received,
            "unique": inbox.unique(),
            "duplicated": inbox.duplicated,
            "out_of_order": inbox.out_of_order,
            "foreign": inbox.foreign,
            "error": inbox.error,
        }
        for inbox in inboxes
    ]
    if spec.send_seen:
        report["seen"] = [bytes(inbox.seen) for inbox in inboxes]
    if spec.timed:
        report["latencies"] = b"".join(inbox.latencies.tobytes() for inbox in inboxes)
    for link in links:
        link.close()
    tell_parent(pipe, report)


def _receive(
    spec: ReceiverSpec, pipe: Connection, progress: Any, links: list[Link], inboxes: list[Inbox]
) -> dict[str, Any]:
    """The timed loop of a receiver: read, scan, acknowledge, until stopped."""
    selector = selectors.DefaultSelector()
    for link, inbox in zip(links, inboxes, strict=True):
        # A timeout, not non-blocking mode: ACKs are written with sendall, which
        # must wait for room rather than fail.
        link.sock.settimeout(max(1.0, spec.deadline - time.monotonic()))
        selector.register(link.sock, selectors.EVENT_READ, (link, inbox))
    selector.register(pipe, selectors.EVENT_READ, None)
    slot = spec.slot
    read_delay = spec.read_delay
    total = 0
    first_ns = last_ns = 0
    closed: str | None = None
    stopped = timed_out = False
    try:
        while not stopped:
            remaining = spec.deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            largest = 0
            for key, _ in selector.select(min(remaining, 0.2)):
                if key.data is None:
                    stopped = True
                    continue
                link, inbox = key.data
                data = link.sock.recv(READ_SIZE)
                if not data:
                    closed = closed or f"the broker closed a connection ({link.peer})"
                    selector.unregister(link.sock)
                    continue
                now_ns = time.monotonic_ns()
                count = inbox.receive(link.decode(data), now_ns)
                if link.decoder is not None and link.decoder.closed:
                    closed = closed or f"the broker closed a WebSocket ({link.peer})"
                    selector.unregister(link.sock)
                if count:
                    total += count
                    last_ns = now_ns
                    if not first_ns:
                        first_ns = now_ns
                    acks = inbox.take_acks()
                    if acks:
                        link.sock.sendall(link.pack(acks))
                if len(data) > largest:
                    largest = len(data)
            progress[slot] = total
            if read_delay and largest < SMALL_READ:
                time.sleep(read_delay)
    except OSError as error:
        closed = closed or f"connection lost: {error}"
    finally:
        selector.close()
    progress[slot] = total
    return {"first_ns": first_ns, "last_ns": last_ns, "closed": closed, "timed_out": timed_out}


# -- publishers -----------------------------------------------------------------


def run_publisher(spec: PublisherSpec, pipe: Connection) -> None:
    """
    Connect, then publish until the count, the duration or a stall ends it.

    :param spec: the process's work.
    :param pipe: to the parent.
    """
    try:
        link = Link(spec.endpoint, spec.websocket, spec.setup_timeout)
    except BenchmarkError as error:
        tell_parent(pipe, {"error": str(error)})
        return
    tell_parent(pipe, {"ready": 1})
    if await_parent(pipe, spec.deadline) != "go":
        link.close()
        return
    cpu_before = own_cpu_seconds()
    try:
        report = _publish(spec, link)
    except OSError as error:
        report = {"error": f"connection lost: {error}", "sent": 0, "confirmed": 0}
    report["cpu_s"] = own_cpu_seconds() - cpu_before
    link.close()
    tell_parent(pipe, report)


def _publish(spec: PublisherSpec, link: Link) -> dict[str, Any]:
    """
    The timed loop of a publisher.

    The window: a receipt is asked for every ``receipt_every`` frames, and no
    more frames go out while ``window`` receipts are outstanding, so at most
    ``receipt_every * window`` frames are in flight.  Paced, frames go out when
    due (several at once if the loop fell behind), each stamped with its time of writing.
    """
    template = SendTemplate(spec.destination, spec.body, spec.extra_headers, spec.varying)
    sock = link.sock
    sock.settimeout(spec.stall)
    inbox = Inbox(link.version)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    first, stride, rate = spec.first_seq, spec.stride, spec.rate
    every, window, max_count = spec.receipt_every, spec.window, spec.max_count
    pending: deque[int] = deque()  # frames sent by the time of each outstanding receipt
    sent = confirmed = 0
    stalled = False
    error: str | None = None
    start = time.monotonic()
    first_ns = time.monotonic_ns()
    last_receipt_ns = first_ns
    end = min(start + spec.duration, spec.deadline)
    last_progress = start
    while True:
        now = time.monotonic()
        sending = sent < max_count and now < end
        if not sending and not pending:
            break
        if sending and len(pending) < window:
            if rate:
                due = min(max_count, int((now - start) * rate) + 1) - sent
                frames = []
                for index in range(sent, sent + due):
                    receipt = (index + 1) % every == 0
                    frames.append(
                        template.timed_frame(first + index * stride, time.monotonic_ns(), receipt)
                    )
                    if receipt:
                        pending.append(index + 1)
            else:
                due = min(every, max_count - sent)
                frames = template.frames(
                    range(first + sent * stride, first + (sent + due) * stride, stride), True
                )
                pending.append(sent + due)
            if due > 0:
                sock.sendall(link.pack(frames))
                sent += due
                last_progress = now
                if not rate:
                    continue
        if sending and rate and len(pending) < window:
            wait = max(0.0, start + sent / rate - time.monotonic())
        else:
            wait = spec.stall - (now - last_progress)
            if wait <= 0:
                stalled = True
                break
        if not selector.select(wait):
            continue
        data = sock.recv(65536)
        if not data:
            error = "the broker closed the connection"
            break
        before = inbox.receipts
        inbox.receive(link.decode(data))
        if inbox.error is not None:
            error = f"broker sent ERROR: {inbox.error}"
            break
        for _ in range(inbox.receipts - before):
            confirmed = pending.popleft()
        if inbox.receipts > before:
            last_receipt_ns = time.monotonic_ns()
            last_progress = time.monotonic()
    selector.close()
    return {
        "sent": sent,
        "confirmed": confirmed,
        "first_ns": first_ns,
        "last_receipt_ns": last_receipt_ns,
        "stalled": stalled,
        "error": error,
    }
