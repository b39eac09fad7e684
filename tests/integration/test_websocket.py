"""
STOMP over WebSocket against the real broker, with Autobahn's Twisted client.

These are ``twisted.trial`` test cases, which pytest runs: trial spins the
reactor for each test until its Deferred fires, or fails it after
:attr:`timeout` seconds, and fails a test that leaves timers or sockets behind.
One broker (``twistd``, a subprocess: :class:`tests.support.process.SharedBroker`)
serves the whole class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from autobahn.websocket.types import ConnectionResponse
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.trial import unittest

from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser
from tests.support.clients import connect as stomp_connect
from tests.support.process import SharedBroker

#: Bounded waits: every Deferred a test waits on fails after this many seconds.
WAIT = 5.0
MAX_FRAME_SIZE = 2000
PING_INTERVAL = 0.2
PING_TIMEOUT = 0.4
STOMP_SUBPROTOCOLS = ("v12.stomp", "v11.stomp", "v10.stomp")


class RecordingClient(WebSocketClientProtocol):
    """An Autobahn client that records the STOMP frames, message kinds and pings it receives."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []
        self.kinds: list[bool] = []
        self.pings = 0
        self.answer_pings = True
        self.subprotocol: str | None = None
        self.opened: defer.Deferred[None] = defer.Deferred()
        self.closed: defer.Deferred[int | None] = defer.Deferred()
        self._parser = FrameParser(max_frame_size=1 << 30)
        self._waiting: list[tuple[Callable[[], bool], defer.Deferred[None]]] = []

    def onConnect(self, response: ConnectionResponse) -> None:
        self.subprotocol = response.protocol

    def onOpen(self) -> None:
        self.opened.callback(None)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.kinds.append(isBinary)
        self.frames.extend(self._parser.receive_data(payload))
        self._changed()

    def onPing(self, payload: bytes) -> None:
        self.pings += 1
        if self.answer_pings:
            super().onPing(payload)
        self._changed()

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        self.closed.callback(code)

    def _changed(self) -> None:
        still = []
        for condition, waiter in self._waiting:
            if condition():
                waiter.callback(None)
            else:
                still.append((condition, waiter))
        self._waiting = still

    def wait_for(self, condition: Callable[[], bool]) -> defer.Deferred[None]:
        """
        :returns: a Deferred that fires once ``condition()`` holds, or fails after :data:`WAIT` s.
        """
        waiter: defer.Deferred[None] = defer.Deferred()
        if condition():
            waiter.callback(None)
        else:
            self._waiting.append((condition, waiter))
            waiter.addTimeout(WAIT, reactor)
        return waiter

    def commands(self) -> list[str]:
        return [frame.command for frame in self.frames]

    def send_stomp(
        self, data: bytes, binary: bool = False, fragment_size: int | None = None
    ) -> None:
        self.sendMessage(data, isBinary=binary, fragmentSize=fragment_size)

    @defer.inlineCallbacks
    def stomp_connect(self, accept_version: str = "1.2") -> Any:
        self.send_stomp(f"CONNECT\naccept-version:{accept_version}\nhost:/\n\n\x00".encode())
        yield self.wait_for(lambda: len(self.frames) >= 1)
        return self.frames[0]

    @defer.inlineCallbacks
    def disconnect(self) -> Any:
        """DISCONNECT with a receipt, then wait for the broker's close."""
        self.send_stomp(b"DISCONNECT\nreceipt:bye\n\n\x00")
        code = yield self.closed.addTimeout(WAIT, reactor)
        return code


class WebSocketTests(SharedBroker, unittest.TestCase):
    """The broker's /ws endpoint as Autobahn's client sees it."""

    timeout = 20
    broker_args = (
        *("--heartbeat", "0,0", "--max-frame-size", str(MAX_FRAME_SIZE)),
        *("--ws-ping-interval", str(PING_INTERVAL), "--ws-ping-timeout", str(PING_TIMEOUT)),
    )

    @defer.inlineCallbacks
    def open(self, protocols: tuple[str, ...] = STOMP_SUBPROTOCOLS, path: str = "/ws") -> Any:
        """Open a WebSocket to the broker; it is closed when the test ends."""
        port = self.broker.http_port
        factory = WebSocketClientFactory(f"ws://127.0.0.1:{port}{path}", protocols=list(protocols))
        factory.protocol = RecordingClient
        # No client-side timers: the test's own bounded waits decide, and trial
        # finds no delayed calls left behind.
        factory.setProtocolOptions(openHandshakeTimeout=0, closeHandshakeTimeout=0)
        client = yield TCP4ClientEndpoint(reactor, "127.0.0.1", port).connect(factory)
        self.addCleanup(self._close, client)
        yield client.opened.addTimeout(WAIT, reactor)
        return client

    def _close(self, client: RecordingClient) -> defer.Deferred[Any]:
        if not client.closed.called:
            client.dropConnection(abort=True)
        return client.closed

    @defer.inlineCallbacks
    def test_each_subprotocol_speaks_its_version(self) -> Any:
        """
        Each of v12.stomp, v11.stomp and v10.stomp is accepted and fixes the STOMP version of the
        session.
        """
        for subprotocol, version in zip(STOMP_SUBPROTOCOLS, ("1.2", "1.1", "1.0"), strict=True):
            client = yield self.open((subprotocol,))
            self.assertEqual(client.subprotocol, subprotocol)
            connected = yield client.stomp_connect("1.0,1.1,1.2")
            self.assertEqual((connected.command, connected.get("version")), ("CONNECTED", version))
            code = yield client.disconnect()
            self.assertEqual(client.commands(), ["CONNECTED", "RECEIPT"])
            self.assertEqual(code, 1000)

    @defer.inlineCallbacks
    def test_no_subprotocol_is_stomp_1_2_on_both_paths(self) -> Any:
        """A client offering no subprotocol, at /ws or /stomp, connects with STOMP 1.2."""
        for path in ("/ws", "/stomp"):
            client = yield self.open((), path=path)
            self.assertIsNone(client.subprotocol)
            connected = yield client.stomp_connect()
            self.assertEqual(connected.get("version"), "1.2")

    @defer.inlineCallbacks
    def test_batched_split_and_fragmented_frames(self) -> Any:
        """
        Many frames in one message, one frame over three messages, and a fragmented message all
        work.
        """
        client = yield self.open()
        yield client.stomp_connect()
        client.send_stomp(
            b"SUBSCRIBE\nid:0\ndestination:/topic/split\n\n\x00"
            b"SEND\ndestination:/topic/split\n\none\x00SEND\ndestination:/topic/split\n\ntwo\x00"
        )
        split = b"SEND\ndestination:/topic/split\n\nthree\x00"
        for piece in (split[:4], split[4:20], split[20:]):
            client.send_stomp(piece)
        client.send_stomp(b"SEND\ndestination:/topic/split\n\nfour\x00", fragment_size=7)
        yield client.wait_for(lambda: len(client.frames) >= 5)
        self.assertEqual(
            [frame.body for frame in client.frames[1:]], [b"one", b"two", b"three", b"four"]
        )

    @defer.inlineCallbacks
    def test_binary_client_gets_binary_and_nul_bodies_intact(self) -> Any:
        """
        A client speaking binary messages hears binary, and a body with NUL bytes crosses intact.
        """
        client = yield self.open()
        client.send_stomp(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00", binary=True)
        body = b"\x00\x01 nul \x00\xff"
        client.send_stomp(
            b"SUBSCRIBE\nid:0\ndestination:/topic/bin\n\n\x00"
            b"SEND\ndestination:/topic/bin\ncontent-length:%d\n\n%s\x00" % (len(body), body),
            binary=True,
        )
        yield client.wait_for(lambda: len(client.frames) >= 2)
        self.assertEqual(client.frames[1].body, body)
        self.assertEqual(set(client.kinds), {True})

    @defer.inlineCallbacks
    def test_websocket_and_tcp_clients_share_a_topic(self) -> Any:
        """A stomp.py TCP client and a WebSocket client reach each other through one broker."""
        client = yield self.open()
        yield client.stomp_connect()
        client.send_stomp(b"SUBSCRIBE\nid:w\ndestination:/topic/shared\nreceipt:r\n\n\x00")
        yield client.wait_for(lambda: "RECEIPT" in client.commands())
        connection, inbox = stomp_connect(self.broker.address)
        try:
            connection.subscribe("/topic/shared", id="t")
            connection.send("/topic/shared", b"from tcp", receipt="sent")
            yield client.wait_for(lambda: "MESSAGE" in client.commands())
            self.assertEqual(client.frames[-1].body, b"from tcp")
            self.assertTrue(inbox.wait_for(lambda: inbox.bodies() == [b"from tcp"]))
            # The broker routes a SEND before it writes the SEND's RECEIPT.
            client.send_stomp(b"SEND\ndestination:/topic/shared\nreceipt:s\n\nfrom ws\x00")
            yield client.wait_for(lambda: client.commands().count("RECEIPT") == 2)
            self.assertTrue(inbox.wait_for(lambda: b"from ws" in inbox.bodies()))
        finally:
            connection.disconnect()

    @defer.inlineCallbacks
    def test_message_over_the_limit_gets_error_and_close_1009(self) -> Any:
        """
        A message bigger than --max-frame-size gets an ERROR frame, then WebSocket close code 1009.
        """
        client = yield self.open()
        yield client.stomp_connect()
        client.send_stomp(b"SEND\ndestination:/topic/big\n\n" + b"x" * MAX_FRAME_SIZE + b"\x00")
        code = yield client.closed.addTimeout(WAIT, reactor)
        self.assertEqual(client.commands(), ["CONNECTED", "ERROR"])
        self.assertEqual(
            client.frames[1].get("message"), f"frame too large: more than {MAX_FRAME_SIZE} bytes"
        )
        self.assertEqual(code, 1009)

    @defer.inlineCallbacks
    def test_server_pings_a_quiet_client(self) -> Any:
        """The broker pings every --ws-ping-interval, and a client that answers stays connected."""
        client = yield self.open()
        yield client.stomp_connect()
        yield client.wait_for(lambda: client.pings >= 3)
        self.assertFalse(client.closed.called)
        client.send_stomp(b"SUBSCRIBE\nid:0\ndestination:/topic/alive\nreceipt:r\n\n\x00")
        yield client.wait_for(lambda: "RECEIPT" in client.commands())

    @defer.inlineCallbacks
    def test_client_that_stops_answering_is_dropped(self) -> Any:
        """
        A client that answers no ping is dropped once --ws-ping-timeout has passed after a ping.
        """
        client = yield self.open()
        yield client.stomp_connect()
        answered = client.pings
        client.answer_pings = False
        yield client.wait_for(lambda: client.pings > answered)
        started = reactor.seconds()
        code = yield client.closed.addTimeout(WAIT, reactor)
        self.assertLess(reactor.seconds() - started, PING_TIMEOUT + 2.0)
        self.assertEqual(client.pings, answered + 1)
        self.assertEqual(code, 1006)
