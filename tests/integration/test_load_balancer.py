"""
The real client address behind Debian's haproxy, in front of a real broker:
``send-proxy-v2`` to a ``haproxy:`` listener for STOMP over TCP, and HTTP mode
with ``option forwardfor`` to the web port for STOMP over WebSocket, which
believes the header from ``--trusted-proxy 127.0.0.1`` only.  Clients connect
from other loopback addresses (127.0.0.2 and up) while haproxy connects from
127.0.0.1, so the management API's connections list and
``--max-connections-per-address 1`` tell the client from the balancer.  The web
port may sit behind ``send-proxy-v2`` too (``--http haproxy:tcp:PORT``): then a
real WebSocket client (websocket-client) speaks STOMP through it.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket

from stompbroker.protocol.parser import FrameParser
from tests.support.clients import RawClient
from tests.support.haproxy import HAProxy
from tests.support.process import BrokerProcess, free_port
from tests.support.websocket import RawWebSocket, handshake_request

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00"


@pytest.fixture
def balanced(tmp_path: Path) -> Iterator[tuple[BrokerProcess, HAProxy]]:
    """A broker with a PROXY-protocol listener and haproxy in front of it."""
    proxy_port = free_port()
    with BrokerProcess(
        tmp_path / "broker",
        "--listen", f"haproxy:tcp:{proxy_port}:interface=127.0.0.1",
        "--max-connections-per-address", "1",
        "--trusted-proxy", "127.0.0.1",
        "--data-dir", "none",
    ) as broker:  # fmt: skip
        with HAProxy(tmp_path, proxy_port, broker.http_port) as haproxy:
            yield broker, haproxy


def connections(broker: BrokerProcess, port: int | None = None) -> list[dict[str, Any]]:
    """:returns: the API's connections, asked on ``port`` (the broker's web port by default)."""
    url = f"http://127.0.0.1:{port or broker.http_port}/api/connections"
    with urllib.request.urlopen(url, timeout=10) as page:
        listed: list[dict[str, Any]] = json.load(page)
    return listed


def stomp_through(haproxy: HAProxy, source: str) -> tuple[RawClient, str]:
    """:returns: a client connected from ``source`` via haproxy, and its first frame's command."""
    client = RawClient(("127.0.0.1", haproxy.stomp_port), source=source)
    client.send(CONNECT)
    [frame] = client.read_frames(count=1)
    return client, frame.command


def websocket_through(haproxy: HAProxy, source: str) -> tuple[RawWebSocket, str]:
    client = RawWebSocket(("127.0.0.1", haproxy.web_port), handshake_request(), source=source)
    assert client.status == 101
    client.send(CONNECT)
    [frame] = client.read_stomp(1)
    return client, frame.command


def test_proxy_v2_gives_the_api_and_the_limit_the_clients_address(
    balanced: tuple[BrokerProcess, HAProxy],
) -> None:
    """send-proxy-v2: the API lists the client's address and port; the limit counts clients."""
    broker, haproxy = balanced
    first, command = stomp_through(haproxy, "127.0.0.2")
    assert command == "CONNECTED"
    port = first.socket.getsockname()[1]
    assert [c["peer"] for c in connections(broker)] == [f"127.0.0.2:{port}"]
    again, command = stomp_through(haproxy, "127.0.0.2")
    assert command == "ERROR"
    other, command = stomp_through(haproxy, "127.0.0.3")
    assert command == "CONNECTED"
    assert sorted(c["peer"].rsplit(":", 1)[0] for c in connections(broker)) == [
        "127.0.0.2",
        "127.0.0.3",
    ]
    for client in (first, again, other):
        client.close()


def test_forwardfor_gives_websocket_sessions_the_clients_address(
    balanced: tuple[BrokerProcess, HAProxy],
) -> None:
    """HTTP mode with option forwardfor, from a trusted proxy: the WebSocket client's address."""
    broker, haproxy = balanced
    first, command = websocket_through(haproxy, "127.0.0.4")
    assert command == "CONNECTED"
    [listed] = connections(broker)
    assert (listed["peer"], listed["transport"]) == ("127.0.0.4:0", "ws")
    again, command = websocket_through(haproxy, "127.0.0.4")
    assert command == "ERROR"
    other, command = websocket_through(haproxy, "127.0.0.5")
    assert command == "CONNECTED"
    for client in (first, again, other):
        client.socket.close()


def test_the_header_from_an_untrusted_client_is_ignored(
    balanced: tuple[BrokerProcess, HAProxy],
) -> None:
    """A client that sends X-Forwarded-For itself, not through the proxy, keeps its address."""
    broker, _ = balanced
    request = handshake_request(headers=(("X-Forwarded-For", "192.0.2.7"),))
    client = RawWebSocket(("127.0.0.1", broker.http_port), request, source="127.0.0.6")
    client.send(CONNECT)
    assert [frame.command for frame in client.read_stomp(1)] == ["CONNECTED"]
    [listed] = connections(broker)
    assert listed["peer"] == f"127.0.0.6:{client.socket.getsockname()[1]}"
    client.socket.close()


@pytest.fixture
def web_behind_proxy_protocol(tmp_path: Path) -> Iterator[tuple[BrokerProcess, HAProxy]]:
    """A broker whose web port reads PROXY v2 headers, and haproxy sending them in TCP mode."""
    with BrokerProcess(
        tmp_path / "broker",
        "--data-dir", "none",
        http="haproxy:tcp:{port}:interface=127.0.0.1",
    ) as broker:  # fmt: skip
        with HAProxy(tmp_path, free_port(), broker.http_port, web_send_proxy=True) as haproxy:
            yield broker, haproxy


def read_frame(client: websocket.WebSocket) -> Any:
    """:returns: the STOMP frame of the next WebSocket message."""
    message = client.recv()
    [frame] = FrameParser().receive_data(
        message if isinstance(message, bytes) else message.encode()
    )
    return frame


def test_stomp_over_websocket_through_send_proxy_v2(
    web_behind_proxy_protocol: tuple[BrokerProcess, HAProxy],
) -> None:
    """
    After the PROXY header and the upgrade, the WebSocket protocol gets the
    frames (not the HTTP channel that read the handshake): CONNECT, SUBSCRIBE,
    SEND and the MESSAGE back, and the API names the client's address.
    """
    broker, haproxy = web_behind_proxy_protocol
    client = websocket.create_connection(
        f"ws://127.0.0.1:{haproxy.web_port}/ws", subprotocols=["v12.stomp"], timeout=10
    )
    try:
        client.send(CONNECT.decode())
        assert read_frame(client).command == "CONNECTED"
        client.send("SUBSCRIBE\nid:0\ndestination:/topic/room\n\n\x00")
        client.send("SEND\ndestination:/topic/room\nreceipt:r\n\nhello\x00")
        received = [read_frame(client) for _ in range(2)]
        message = next(frame for frame in received if frame.command == "MESSAGE")
        assert message.body == b"hello"
        [listed] = connections(broker, haproxy.web_port)
        assert (listed["peer"], listed["transport"]) == (
            f"127.0.0.1:{client.sock.getsockname()[1]}",
            "ws",
        )
    finally:
        client.close()
