"""
A STOMP-over-WebSocket client that offers permessage-deflate: Autobahn's own, on
Twisted, run as a child process against a real broker.

Usage: ``python -m tests.support.deflate_client WS_URL COUNT SIZE [--no-offer]``.
It subscribes to a topic, publishes ``COUNT`` JSON bodies of about ``SIZE`` bytes
there, waits for them all, and prints one JSON line: the extension the server
agreed to (or ``null``), the bodies it got, and Autobahn's count of the bytes it
read on the wire and after decompression.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol, connectWS
from autobahn.websocket.compress import (
    PerMessageDeflateOffer,
    PerMessageDeflateResponse,
    PerMessageDeflateResponseAccept,
)
from twisted.internet import task
from twisted.internet.defer import Deferred

TOPIC = "/topic/prices"


def json_body(index: int, size: int) -> bytes:
    """A JSON document like a web app's: repeated keys, varying numbers, about ``size`` bytes."""
    rows = []
    while len(json.dumps(rows)) < size:
        n = index * 31 + len(rows)
        rows.append(
            {
                "symbol": f"EUR{n % 97:03d}",
                "bid": 1.08 + n / 1e4,
                "ask": 1.09 + n / 1e4,
                "ts": 1_700_000_000_000 + n * 17,
                "venue": "primary",
            }
        )
    return json.dumps(rows).encode()


class Client(WebSocketClientProtocol):
    count = 0
    size = 0
    done: Deferred[dict[str, Any]]

    def onOpen(self) -> None:
        self.received: list[int] = []
        self.buffer = b""
        self.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")

    def send(self, frame: bytes) -> None:
        self.sendMessage(frame, isBinary=False)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.buffer += payload
        while b"\x00" in self.buffer:
            frame, _, self.buffer = self.buffer.partition(b"\x00")
            self.frame(frame.lstrip(b"\n"))

    def frame(self, frame: bytes) -> None:
        command = frame.split(b"\n", 1)[0]
        if command == b"CONNECTED":
            self.send(f"SUBSCRIBE\nid:0\ndestination:{TOPIC}\nreceipt:s\n\n\x00".encode())
        elif command == b"RECEIPT":
            for index in range(self.count):
                body = json_body(index, self.size)
                self.send(
                    b"SEND\ndestination:"
                    + TOPIC.encode()
                    + b"\ncontent-type:application/json\n\n"
                    + body
                    + b"\x00"
                )
        elif command == b"MESSAGE":
            self.received.append(len(frame.partition(b"\n\n")[2]))
            if len(self.received) == self.count:
                stats = self.trafficStats
                extensions = [type(e).__name__ for e in self.websocket_extensions_in_use]
                self.done.callback(
                    {
                        "extensions": extensions,
                        "messages": len(self.received),
                        "body_bytes": sum(self.received),
                        "wire_bytes_in": stats.incomingOctetsWireLevel,
                        "app_bytes_in": stats.incomingOctetsAppLevel,
                    }
                )
                self.sendClose()


def main(reactor: Any, url: str, count: str, size: str, *flags: str) -> Deferred[None]:
    done: Deferred[dict[str, Any]] = Deferred()
    factory = WebSocketClientFactory(url, protocols=["v12.stomp"], reactor=reactor)
    factory.protocol = Client
    Client.count, Client.size, Client.done = int(count), int(size), done
    if "--no-offer" not in flags:

        def accept(response: PerMessageDeflateResponse) -> PerMessageDeflateResponseAccept | None:
            if isinstance(response, PerMessageDeflateResponse):
                return PerMessageDeflateResponseAccept(response)
            return None

        factory.setProtocolOptions(
            perMessageCompressionOffers=[PerMessageDeflateOffer(accept_max_window_bits=True)],
            perMessageCompressionAccept=accept,
        )
    connectWS(factory)
    done.addTimeout(30, reactor)
    return done.addCallback(lambda result: print(json.dumps(result), flush=True))


if __name__ == "__main__":
    task.react(main, sys.argv[1:])
