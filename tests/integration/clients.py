"""Real clients for integration tests: ``stomp.py`` connections and a raw socket."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import stomp

from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser

CONNECTIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


class Collector(stomp.ConnectionListener):
    """Records what a ``stomp.py`` connection receives, and lets a test wait for it."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
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
        self._record(lambda: self.messages.append(frame))

    def on_receipt(self, frame: Any) -> None:
        self._record(lambda: self.receipts.append(frame.headers["receipt-id"]))

    def on_error(self, frame: Any) -> None:
        self._record(lambda: self.errors.append(frame))

    def on_heartbeat(self) -> None:
        self._record(lambda: setattr(self, "heartbeats", self.heartbeats + 1))

    def on_disconnected(self) -> None:
        self._record(lambda: setattr(self, "disconnected", True))

    def wait_for(self, condition: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until ``condition()`` holds; :returns: whether it did in time."""
        with self._changed:
            return self._changed.wait_for(condition, timeout)

    def bodies(self) -> list[Any]:
        return [message.body for message in self.messages]


def connect(
    address: tuple[str, int], version: str = "1.2", heartbeats: tuple[int, int] = (0, 0)
) -> tuple[Any, Collector]:
    """Open a ``stomp.py`` connection of the given protocol version, with a :class:`Collector`."""
    cls = CONNECTIONS[version]
    kwargs: dict[str, Any] = {"auto_decode": False}
    if version != "1.0":
        kwargs["heartbeats"] = heartbeats
    connection = cls([address], **kwargs)
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect(wait=True)
    return connection, collector


class RawClient:
    """A plain socket that speaks bytes, for input no real client would send."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.socket = socket.create_connection(address, timeout=5)
        self.parser = FrameParser(max_frame_size=1 << 30)

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def connect(self, version: str = "1.2", heart_beat: str = "0,0") -> Frame:
        self.send(
            f"CONNECT\naccept-version:{version}\nhost:/\nheart-beat:{heart_beat}\n\n\x00".encode()
        )
        [connected] = self.read_frames(count=1)
        return connected

    def read_frames(self, count: int = 1, timeout: float = 5.0) -> list[Frame]:
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

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
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
