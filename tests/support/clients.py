"""
Real clients for tests against a running broker: ``stomp.py`` connections, a
listener that records what they receive, a raw socket that speaks bytes, and a
well-behaved bystander.

A test that must show that something does *not* arrive cannot wait for it: a
slow broker would pass any wait.  :func:`flush_deliveries` sends a marker
instead, behind everything the broker may still owe a connection, and waits for
it: once the marker is there, whatever was coming has come.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import stomp

from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser

CONNECTIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}
#: The header that makes a message a marker of :func:`flush_deliveries`.
MARKER_HEADER = "x-test-marker"
#: How long a test waits for what it expects, in seconds.
WAIT = 5.0


def is_marker(frame: Any) -> bool:
    """:returns: whether a MESSAGE is a marker of :func:`flush_deliveries`."""
    return MARKER_HEADER in frame.headers


class Collector(stomp.ConnectionListener):
    """
    Records what a ``stomp.py`` connection receives, and lets a test wait for it.

    Markers (:func:`flush_deliveries`) go to :attr:`markers`, never to :attr:`messages`.
    """

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.markers: set[str] = set()
        self.receipts: list[str] = []
        self.errors: list[Any] = []
        self.heartbeats = 0
        self.disconnected = False
        self._changed = threading.Condition()

    def _record(self, action: Callable[[], None]) -> None:
        with self._changed:
            action()
            self._changed.notify_all()

    def on_message(self, frame: Any) -> None:
        if is_marker(frame):
            self._record(lambda: self.markers.add(frame.headers[MARKER_HEADER]))
        else:
            self._record(lambda: self.messages.append(frame))

    def on_receipt(self, frame: Any) -> None:
        self._record(lambda: self.receipts.append(frame.headers["receipt-id"]))

    def on_error(self, frame: Any) -> None:
        self._record(lambda: self.errors.append(frame))

    def on_heartbeat(self) -> None:
        self._record(lambda: setattr(self, "heartbeats", self.heartbeats + 1))

    def on_disconnected(self) -> None:
        self._record(lambda: setattr(self, "disconnected", True))

    def wait_for(self, condition: Callable[[], bool], timeout: float = WAIT) -> bool:
        """Wait until ``condition()`` holds; :returns: whether it did in time."""
        with self._changed:
            return self._changed.wait_for(condition, timeout)

    def bodies(self) -> list[Any]:
        return [message.body for message in self.messages]


def connect(
    address: tuple[str, int],
    version: str = "1.2",
    heartbeats: tuple[int, int] = (0, 0),
    *,
    collector: Collector | None = None,
    login: str | None = None,
    passcode: str | None = None,
    headers: dict[str, str] | None = None,
    ca_certs: str | None = None,
) -> tuple[Any, Collector]:
    """
    Open a ``stomp.py`` connection of the given protocol version and wait for CONNECTED.

    :param collector: its listener; a new :class:`Collector` by default.
    :param login: with ``passcode``, the credentials of the CONNECT frame.
    :param headers: more headers of the CONNECT frame (``client-id``).
    :param ca_certs: speak TLS, trusting the certificates in this PEM file.
    :returns: the connection and its listener.
    """
    kwargs: dict[str, Any] = {"auto_decode": False}
    if version != "1.0":
        kwargs["heartbeats"] = heartbeats
    connection = CONNECTIONS[version]([address], **kwargs)
    if ca_certs is not None:
        connection.set_ssl(for_hosts=[address], ca_certs=ca_certs)
    collector = Collector() if collector is None else collector
    connection.set_listener("collector", collector)
    connection.connect(login, passcode, wait=True, headers=headers or {})
    return connection, collector


def publish(address: tuple[str, int], destination: str, bodies: list[Any], **headers: str) -> None:
    """
    Send ``bodies`` in order on a connection of their own, each with ``headers`` and a
    receipt, and wait for every receipt (for a persistent message: until it is stored).
    """
    connection, events = connect(address)
    for index, body in enumerate(bodies):
        connection.send(destination, body, headers=dict(headers), receipt=f"sent-{index}")
    assert events.wait_for(lambda: len(events.receipts) == len(bodies)), events.receipts
    connection.disconnect()


def flush_deliveries(
    connection: Any, inbox: Collector, sender: Any = None, timeout: float = WAIT
) -> None:
    """
    Wait until the broker has delivered to ``connection`` all it would deliver by now.

    ``connection`` subscribes to a topic of its own, and ``sender`` sends a marker
    there, with a receipt.  The broker handles each connection's frames in order
    and writes to each connection in order, so when the marker arrives, so has
    everything that the sender's earlier frames, and any frame the broker had
    answered before the marker came, led it to send to ``connection``.

    :param inbox: ``connection``'s listener.
    :param sender: the connection whose frames must be handled first;
        ``connection`` itself by default (its own ACKs, NACKs, UNSUBSCRIBEs).
    :raises AssertionError: when the marker does not arrive within ``timeout``.
    """
    token = uuid.uuid4().hex
    topic = f"/topic/marker.{token}"
    connection.subscribe(topic, id=f"marker-{token}", receipt=f"marker-{token}")
    assert inbox.wait_for(lambda: f"marker-{token}" in inbox.receipts, timeout)
    sender = connection if sender is None else sender
    sender.send(topic, b"marker", headers={MARKER_HEADER: token}, receipt=f"marked-{token}")
    assert inbox.wait_for(lambda: token in inbox.markers, timeout), "the marker never arrived"


def through(inbox: Collector, *paths: tuple[Any, str], timeout: float = WAIT) -> None:
    """
    Send a marker along each path and wait until ``inbox`` has every one: the
    barrier before counting exactly what arrived, in place of a quiet period.

    A path keeps order (what one sender sends to one destination reaches a
    subscriber in the order sent, across nodes too), so once a path's marker has
    arrived, so has everything sent on that path before it.  Markers go to
    :attr:`Collector.markers`, never to its messages.

    :param paths: ``(sender, destination)``: a broker's address, for a marker on
        a connection of its own after everything it acknowledged; or a
        connection, for a marker after that connection's earlier SENDs.
    :raises AssertionError: when a marker does not arrive within ``timeout``.
    """
    tokens = set()
    for sender, destination in paths:
        token = uuid.uuid4().hex
        tokens.add(token)
        if isinstance(sender, tuple):
            publish(sender, destination, [b"marker"], **{MARKER_HEADER: token})
        else:
            sender.send(destination, b"marker", headers={MARKER_HEADER: token})
    assert inbox.wait_for(lambda: tokens <= inbox.markers, timeout), "a marker never arrived"


class Bystander(AbstractContextManager["Bystander"]):
    """
    A well-behaved subscriber, and its publisher, on a broker that other tests'
    clients misuse: their mistakes must never reach it.
    """

    def __init__(self, address: tuple[str, int]) -> None:
        self.connection, self.inbox = connect(address)
        self.destination = f"/topic/bystander.{uuid.uuid4().hex[:8]}"
        self.connection.subscribe(self.destination, id="watch", receipt="watching")
        assert self.inbox.wait_for(lambda: "watching" in self.inbox.receipts)
        self.publisher, _ = connect(address)
        self._pings = itertools.count()

    def still_receiving(self) -> bool:
        """:returns: whether a message published now still reaches the bystander."""
        token = f"ping-{next(self._pings)}".encode()
        self.publisher.send(self.destination, token)
        return self.inbox.wait_for(lambda: token in self.inbox.bodies())

    def __exit__(self, *failure: object) -> None:
        self.publisher.disconnect()
        self.connection.disconnect()


def drain(broker: Any, destination: str, count: int, **headers: str) -> list[Any]:
    """
    :param broker: a running broker (its ``address``).
    :returns: the first ``count`` messages of a queue, acknowledged, and no more.
    """
    connection, collector = connect(broker.address)
    connection.subscribe(destination, id="s", ack="client-individual", headers=headers)
    assert collector.wait_for(lambda: len(collector.messages) >= count), collector.bodies()
    for message in collector.messages:
        connection.ack(message.headers["ack"])
    flush_deliveries(connection, collector)
    assert len(collector.messages) == count, collector.bodies()
    connection.disconnect(receipt="bye")
    return collector.messages


class RawClient:
    """A plain socket that speaks bytes, for input no real client would send."""

    def __init__(self, address: tuple[str, int], source: str | None = None) -> None:
        """:param source: the local address to connect from (another loopback address, say)."""
        bind = None if source is None else (source, 0)
        self.socket = socket.create_connection(address, timeout=5, source_address=bind)
        self.parser = FrameParser(max_frame_size=1 << 30)

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def send_until_closed(self, data: bytes) -> None:
        """Send ``data``, or as much of it as the broker reads before it closes the connection."""
        try:
            self.send(data)
        except (BrokenPipeError, ConnectionResetError):
            return

    def connect(self, version: str = "1.2", heart_beat: str = "0,0") -> Frame:
        self.send(
            f"CONNECT\naccept-version:{version}\nhost:/\nheart-beat:{heart_beat}\n\n\x00".encode()
        )
        [connected] = self.read_frames(count=1)
        return connected

    def subscribe(self, destination: str, *headers: str) -> Frame:
        """
        SUBSCRIBE (with id 0, and ``headers`` as ``name:value`` lines) with a receipt.

        :returns: the broker's answer, a RECEIPT when all went well.
        """
        lines = ["SUBSCRIBE", "id:0", f"destination:{destination}", *headers, "receipt:s"]
        self.send(("\n".join(lines) + "\n\n\x00").encode())
        [answer] = self.read_frames(count=1)
        return answer

    def read_frames(self, count: int = 1, timeout: float = WAIT) -> list[Frame]:
        """Read until ``count`` frames have arrived, the peer closes, or time runs out."""
        frames: list[Frame] = []
        deadline = time.monotonic() + timeout
        while len(frames) < count and time.monotonic() < deadline:
            self.socket.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.socket.recv(65536)
            except TimeoutError:
                break
            if not data:
                break
            frames.extend(self.parser.receive_data(data))
        return frames

    def closed_by_peer(self, timeout: float = WAIT) -> bool:
        """:returns: whether the broker closes the connection within ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.socket.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.socket.recv(65536)
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True
            if not data:
                return True
        return False

    def close(self) -> None:
        self.socket.close()


def raw_connect(
    address: tuple[str, int], version: str = "1.2", heart_beat: str = "0,0"
) -> RawClient:
    """:returns: a :class:`RawClient` that has sent CONNECT and read the answer."""
    client = RawClient(address)
    client.connect(version, heart_beat)
    return client
