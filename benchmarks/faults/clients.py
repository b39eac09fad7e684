"""
The harness's clients and the history they write.

Every client is a thread on a plain socket (the suite's own :class:`Link` for
the CONNECT) that writes what happens to it into one :class:`History`: each
SEND (a ``seq`` header and a receipt of the same name), RECEIPT, ERROR,
MESSAGE (its ``message-id``, ``seq`` and ``redelivered``), ACK, connect and
disconnect, with the time.  A client whose connection ends connects again, to
its own node first and then to the others, as a client with a list of brokers
does; a consumer subscribes again.

Publishers send persistent messages at a steady pace, with at most ``window``
receipts outstanding (so a publisher the broker holds stops, as a real one
would); consumers are ``client-individual`` and acknowledge each message as it
arrives.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

from attrs import define, field, frozen

from benchmarks.connection import Endpoint, Link
from benchmarks.errors import BenchmarkError
from benchmarks.measure import process_rss_kb
from benchmarks.wire import command_of, encode_frame, error_text, header_of, split_frames

__all__ = [
    "Consumer",
    "Event",
    "Flood",
    "FloodConsumer",
    "History",
    "MemorySampler",
    "Publisher",
]

#: Seconds a CONNECT may take before the client tries the next node.
CONNECT_TIMEOUT = 2.0
#: Seconds between attempts when no node answers.
RETRY = 0.2
#: Seconds a read blocks before the client looks whether it must stop.
POLL = 0.25

#: Where a client connects, in the order it tries: a callable, since a node
#: started again listens on another port.
Addresses = Callable[[], list[tuple[str, int]]]


@frozen
class Event:
    """
    One thing that happened to one client.

    :ivar at: ``time.monotonic()``.
    :ivar kind: ``send``, ``receipt``, ``error``, ``message``, ``ack``,
        ``connect`` or ``disconnect``.
    :ivar client: the client's name.
    :ivar seq: the message's ``seq`` (a SEND, its RECEIPT, a MESSAGE; an
        ERROR's ``receipt-id``), else ``""``.
    :ivar detail: the ``message-id`` of a MESSAGE or ACK, an ERROR's message,
        the node connected to.
    :ivar redelivered: a MESSAGE's ``redelivered:true``.
    """

    at: float
    kind: str
    client: str
    seq: str = ""
    detail: str = ""
    redelivered: bool = False


@define
class History:
    """Every client's events, in the order they were recorded (thread-safe)."""

    events: list[Event] = field(factory=list)
    _lock: threading.Lock = field(factory=threading.Lock)

    def add(self, kind: str, client: str, seq: str = "", detail: str = "", **more: bool) -> None:
        """Record one event, now."""
        event = Event(time.monotonic(), kind, client, seq, detail, **more)
        with self._lock:
            self.events.append(event)

    def snapshot(self) -> list[Event]:
        """:returns: the events so far."""
        with self._lock:
            return list(self.events)

    def count(self, kind: str) -> int:
        """:returns: how many events of ``kind`` there are so far."""
        with self._lock:
            return sum(1 for event in self.events if event.kind == kind)


class _Client(threading.Thread):
    """
    A client that stays connected: it connects (to each address in turn),
    runs :meth:`session` until the connection ends, records that, and starts
    again until :meth:`stop`.
    """

    def __init__(self, name: str, history: History, addresses: Addresses, destination: str) -> None:
        super().__init__(name=name, daemon=True)
        self.history = history
        self.addresses = addresses
        self.destination = destination
        self.stopping = threading.Event()
        self._stream = b""

    def stop(self) -> None:
        """Ask it to end; :meth:`join` waits for it."""
        self.stopping.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            link = self._connect()
            if link is None:
                self.stopping.wait(RETRY)
                continue
            self._stream = link.buffered()
            try:
                self.session(link)
            except OSError:
                pass
            finally:
                link.close()
            if not self.stopping.is_set():
                self.history.add("disconnect", self.name)

    def _connect(self) -> Link | None:
        for host, port in self.addresses():
            try:
                link = Link(Endpoint(host, port), timeout=CONNECT_TIMEOUT)
            except BenchmarkError:
                continue
            self.history.add("connect", self.name, detail=f"{host}:{port}")
            return link
        return None

    def session(self, link: Link) -> None:
        """Use one connection until it ends (or the client stops)."""
        raise NotImplementedError

    def frames(self, link: Link) -> list[bytes] | None:
        """
        Read what has come, waiting at most :data:`POLL` (from one thread only).

        :returns: the complete frames (maybe none), or ``None`` when the connection ended.
        """
        link.sock.settimeout(POLL)
        try:
            data = link.sock.recv(65536)
        except TimeoutError:
            return []
        if not data:
            return None
        frames, self._stream = split_frames(self._stream + data)
        return frames

    def on_error(self, frame: bytes) -> None:
        """Record an ERROR, with the receipt it answers, if any."""
        self.history.add(
            "error", self.name, header_of(frame, "receipt-id") or "", error_text(frame)
        )


class Publisher(_Client):
    """
    Sends persistent messages to ``destination`` at ``rate`` a second, each with a
    receipt, at most ``window`` unanswered; ``seq`` and receipt are ``NAME-N``.
    """

    def __init__(
        self,
        name: str,
        history: History,
        addresses: Addresses,
        destination: str,
        rate: float,
        window: int,
    ) -> None:
        super().__init__(name, history, addresses, destination)
        self.interval = 1.0 / rate
        self.window = window
        self.sent = 0
        self._outstanding: set[str] = set()
        self._lock = threading.Condition()

    def session(self, link: Link) -> None:
        reader = threading.Thread(target=self._read, args=(link,), daemon=True)
        reader.start()
        due = time.monotonic()
        try:
            while not self.stopping.is_set() and reader.is_alive():
                with self._lock:
                    if len(self._outstanding) >= self.window:
                        self._lock.wait(POLL)
                        continue
                pause = due - time.monotonic()
                if pause > 0:
                    self.stopping.wait(pause)
                    continue
                seq = f"{self.name}-{self.sent}"
                self.sent += 1
                frame = encode_frame(
                    "SEND",
                    [
                        ("destination", self.destination),
                        ("persistent", "true"),
                        ("seq", seq),
                        ("receipt", seq),
                        ("content-length", "1"),
                    ],
                    b"x",
                )
                with self._lock:
                    self._outstanding.add(seq)
                self.history.add("send", self.name, seq)
                link.sock.sendall(frame)
                due = max(due + self.interval, time.monotonic() - self.interval)
            if self.stopping.is_set():
                self._settle(reader)
        finally:
            if reader.is_alive():
                with contextlib.suppress(OSError):
                    link.sock.shutdown(socket.SHUT_RDWR)
            reader.join(timeout=5)
            with self._lock:
                self._outstanding.clear()
                self._lock.notify_all()

    def _settle(self, reader: threading.Thread, seconds: float = 30.0) -> None:
        """After the last SEND, wait (bounded) for the receipts still owed."""
        deadline = time.monotonic() + seconds
        with self._lock:
            while self._outstanding and reader.is_alive() and time.monotonic() < deadline:
                self._lock.wait(POLL)

    def _read(self, link: Link) -> None:
        while (frames := self.frames(link)) is not None:
            for frame in frames:
                command = command_of(frame)
                if command == b"RECEIPT":
                    seq = header_of(frame, "receipt-id") or ""
                    self.history.add("receipt", self.name, seq)
                    with self._lock:
                        self._outstanding.discard(seq)
                        self._lock.notify_all()
                elif command == b"ERROR":
                    self.on_error(frame)
            if self.stopping.is_set() and not self._outstanding:
                return


class Consumer(_Client):
    """
    A ``client-individual`` subscription to ``destination`` with a prefetch of
    ``prefetch``, acknowledging each MESSAGE as it arrives.
    """

    def __init__(
        self, name: str, history: History, addresses: Addresses, destination: str, prefetch: int
    ) -> None:
        super().__init__(name, history, addresses, destination)
        self.prefetch = prefetch
        self.subscribed = threading.Event()

    def session(self, link: Link) -> None:
        subscribe = encode_frame(
            "SUBSCRIBE",
            [
                ("destination", self.destination),
                ("id", "s"),
                ("ack", "client-individual"),
                ("prefetch-count", str(self.prefetch)),
                ("receipt", "subscribed"),
            ],
        )
        link.sock.sendall(subscribe)
        while not self.stopping.is_set() and (frames := self.frames(link)) is not None:
            acks = []
            for frame in frames:
                command = command_of(frame)
                if command == b"MESSAGE":
                    message_id = header_of(frame, "message-id") or ""
                    self.history.add(
                        "message",
                        self.name,
                        header_of(frame, "seq") or "",
                        message_id,
                        redelivered=header_of(frame, "redelivered") == "true",
                    )
                    acks.append(encode_frame("ACK", [("id", header_of(frame, "ack") or "")]))
                    self.history.add("ack", self.name, detail=message_id)
                elif command == b"RECEIPT":
                    self.subscribed.set()
                elif command == b"ERROR":
                    self.on_error(frame)
            if acks:
                link.sock.sendall(b"".join(acks))


class Flood(_Client):
    """
    Non-persistent SENDs as fast as the node reads them, the load of a
    pipelining producer: a receipt every ``every`` SENDs, at most ``window``
    unanswered.  Its messages are not in the history (they are too many, and
    promised nothing one by one); its ERRORs and disconnects are.

    :ivar sent: SENDs written so far.
    """

    def __init__(
        self,
        name: str,
        history: History,
        addresses: Addresses,
        destination: str,
        size: int = 117,
        every: int = 100,
        window: int = 4,
    ) -> None:
        super().__init__(name, history, addresses, destination)
        send = encode_frame(
            "SEND",
            [("destination", destination), ("content-length", str(size))],
            b"x" * size,
        )
        self._batch = send * (every - 1)
        self._last = [("destination", destination), ("content-length", str(size))]
        self._body = b"x" * size
        self.every = every
        self.window = window
        self.sent = 0
        self._outstanding = 0
        self._lock = threading.Condition()

    def session(self, link: Link) -> None:
        reader = threading.Thread(target=self._read, args=(link,), daemon=True)
        reader.start()
        batches = 0
        try:
            while not self.stopping.is_set() and reader.is_alive():
                with self._lock:
                    if self._outstanding >= self.window:
                        self._lock.wait(POLL)
                        continue
                    self._outstanding += 1
                batches += 1
                last = encode_frame(
                    "SEND", [*self._last, ("receipt", f"{self.name}-{batches}")], self._body
                )
                link.sock.sendall(self._batch + last)
                self.sent += self.every
        finally:
            with contextlib.suppress(OSError):
                link.sock.shutdown(socket.SHUT_RDWR)
            reader.join(timeout=5)
            with self._lock:
                self._outstanding = 0

    def _read(self, link: Link) -> None:
        while not self.stopping.is_set() and (frames := self.frames(link)) is not None:
            for frame in frames:
                command = command_of(frame)
                if command == b"RECEIPT":
                    with self._lock:
                        self._outstanding -= 1
                        self._lock.notify_all()
                elif command == b"ERROR":
                    self.on_error(frame)


class FloodConsumer(_Client):
    """
    An ``auto`` subscription to the flood's queue that counts what it gets,
    second by second (:attr:`per_second`, by ``int(time.monotonic())``).
    """

    def __init__(self, name: str, history: History, addresses: Addresses, destination: str) -> None:
        super().__init__(name, history, addresses, destination)
        self.per_second: dict[int, int] = {}

    def session(self, link: Link) -> None:
        link.sock.sendall(
            encode_frame("SUBSCRIBE", [("destination", self.destination), ("id", "f")])
        )
        link.sock.settimeout(POLL)
        counts = self.per_second
        while not self.stopping.is_set():
            try:
                data = link.sock.recv(262144)
            except TimeoutError:
                continue
            if not data:
                return
            # Every frame ends in a NUL, and the flood's bodies hold none.
            second = int(time.monotonic())
            counts[second] = counts.get(second, 0) + data.count(b"\x00")


class MemorySampler(threading.Thread):
    """
    Samples a process's resident memory (``VmRSS``) every ``every`` seconds
    until :meth:`stop`, or that of the largest of its children if it has any
    (the workers of a ``--workers`` supervisor); :attr:`peak_kb` is the largest
    seen, :attr:`first_kb` the first.
    """

    def __init__(self, pid: int, every: float = 1.0) -> None:
        super().__init__(name=f"rss-{pid}", daemon=True)
        self.pid = pid
        self.every = every
        self.first_kb: int | None = None
        self.peak_kb = 0
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            sizes = [process_rss_kb(pid) for pid in _children(self.pid) or [self.pid]]
            rss = max((size for size in sizes if size is not None), default=None)
            if rss is not None:
                if self.first_kb is None:
                    self.first_kb = rss
                self.peak_kb = max(self.peak_kb, rss)
            self.stopping.wait(self.every)


def _children(pid: int) -> list[int]:
    """:returns: the process ids of ``pid``'s children (none if it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(child) for child in children.read().split()]
    except OSError:
        return []
