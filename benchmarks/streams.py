"""
The ``stream`` scenario: how fast a broker appends to a ``/stream/`` and how
fast one subscriber replays it from ``x-stream-offset:first``.

One connection sends ``max_count`` messages (at most ``duration`` seconds) to
a fresh stream, a receipt every ``receipt_every`` SENDs with at most ``window``
receipts outstanding; the append rate is messages over the time until the last
receipt.  Then a second connection subscribes from ``first`` (``auto``) and
reads until every message has arrived; the replay rate is messages over that
time.  Frames are counted by their NUL terminators (the bodies hold none).
"""

from __future__ import annotations

import secrets
import socket
import time
from typing import Any

from benchmarks.errors import BenchmarkError

#: Seconds a socket read may wait before the run counts as stalled.
READ_TIMEOUT = 10.0


class _Client:
    """A blocking STOMP 1.2 client that counts the frames it reads."""

    def __init__(self, endpoint: Any) -> None:
        self.sock = socket.create_connection((endpoint.host, endpoint.port), timeout=READ_TIMEOUT)
        self.buffer = b""
        headers = f"accept-version:1.2\nhost:{endpoint.vhost}\n"
        if endpoint.login:
            headers += f"login:{endpoint.login}\npasscode:{endpoint.passcode or ''}\n"
        self.sock.sendall(f"CONNECT\n{headers}\n\0".encode())
        if not self.read_frames(1)[0].startswith(b"CONNECTED"):
            raise BenchmarkError("the broker refused the CONNECT")

    def read_frames(self, count: int) -> list[bytes]:
        """:returns: the frames read, at least ``count`` (heart-beat newlines dropped)."""
        frames: list[bytes] = []
        while len(frames) < count:
            while b"\0" not in self.buffer:
                data = self.sock.recv(1 << 20)
                if not data:
                    raise BenchmarkError("the broker closed the connection")
                self.buffer += data
            *done, self.buffer = self.buffer.split(b"\0")
            for frame in done:
                frame = frame.lstrip(b"\r\n")
                if frame.startswith(b"ERROR"):
                    raise BenchmarkError(f"ERROR from the broker: {frame[:300]!r}")
                frames.append(frame)
        return frames

    def count_frames(self, count: int) -> None:
        """Read ``count`` frames without keeping them."""
        seen = self.buffer.count(b"\0")
        while seen < count:
            data = self.sock.recv(1 << 20)
            if not data:
                raise BenchmarkError("the broker closed the connection")
            seen += data.count(b"\0")
            self.buffer = data[data.rfind(b"\0") + 1 :] if b"\0" in data else self.buffer + data

    def close(self) -> None:
        self.sock.close()


def run_stream(endpoint: Any, settings: Any) -> dict[str, Any]:
    """
    :returns: ``append_msgs_per_s``, ``replay_msgs_per_s``, ``messages`` and ``ok``.
    """
    destination = f"/stream/bench.{secrets.token_hex(4)}"
    body = b"x" * settings.size
    every = max(1, settings.receipt_every)
    frame = (
        f"SEND\ndestination:{destination}\ncontent-length:{len(body)}\n\n".encode() + body + b"\0"
    )
    producer = _Client(endpoint)
    started = time.perf_counter()
    sent = outstanding = 0
    deadline = started + settings.duration
    while sent < settings.max_count and time.perf_counter() < deadline:
        batch = min(every, settings.max_count - sent)
        receipted = (
            (
                f"SEND\ndestination:{destination}\ncontent-length:{len(body)}\nreceipt:r{sent}\n\n"
            ).encode()
            + body
            + b"\0"
        )
        producer.sock.sendall(frame * (batch - 1) + receipted)
        sent += batch
        outstanding += 1
        if outstanding >= settings.window:
            outstanding -= len(producer.read_frames(1))
    while outstanding > 0:
        outstanding -= len(producer.read_frames(1))
    appended = time.perf_counter() - started
    producer.close()
    reader = _Client(endpoint)
    started = time.perf_counter()
    reader.sock.sendall(
        f"SUBSCRIBE\ndestination:{destination}\nid:s\nack:auto\nx-stream-offset:first\n\n\0".encode()
    )
    reader.count_frames(sent)
    replayed = time.perf_counter() - started
    reader.close()
    return {
        "messages": sent,
        "append_msgs_per_s": round(sent / appended),
        "replay_msgs_per_s": round(sent / replayed),
        "ok": True,
    }
