"""
The web port of the real broker over plain sockets: bad handshakes, input no
real client sends, and the site's HTTP resources, with
:class:`tests.support.websocket.RawWebSocket`.
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
from collections.abc import Iterator

import pytest

from stompbroker.web.site import STATIC
from tests.support.process import BrokerProcess
from tests.support.websocket import (
    OPCODE_CLOSE,
    RawWebSocket,
    client_frame,
    handshake_request,
    split_response,
)


def read_response(address: tuple[str, int], request: bytes) -> bytes:
    """Send raw bytes to the web port and read the answer until the server closes."""
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


@pytest.fixture(scope="module")
def web(broker: BrokerProcess) -> tuple[str, int]:
    return ("127.0.0.1", broker.http_port)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (handshake_request(upgrade=False), 426),
        (handshake_request(version="12"), 400),
        (handshake_request(protocols="mqtt"), 400),
        (handshake_request(method="POST"), 405),
        (handshake_request().replace(b"Sec-WebSocket-Key", b"X-Key"), 400),
        (handshake_request(path="/stomp", protocols="wamp.2.json"), 400),
    ],
    ids=["no-upgrade", "version-12", "unknown-subprotocol", "post", "no-key", "stomp-path"],
)
def test_bad_handshake_gets_http_error_without_traceback(
    broker: BrokerProcess, web: tuple[str, int], request_bytes: bytes, status: int
) -> None:
    """
    A request that is no valid STOMP WebSocket upgrade gets an HTTP error status, and nothing raises
    in the broker.
    """
    response = read_response(web, request_bytes)
    code, _, body = split_response(response)
    assert code == status
    assert b"Traceback" not in body
    assert "Traceback" not in broker.log()


def test_unknown_subprotocol_response_names_ours(web: tuple[str, int]) -> None:
    """The refusal of a client offering only other subprotocols tells it which ones to offer."""
    response = read_response(web, handshake_request(protocols="mqtt"))
    assert response.startswith(
        b"HTTP/1.1 400 no supported subprotocol offered; this server speaks"
        b" v12.stomp, v11.stomp, v10.stomp\r\n"
    )


def test_announced_oversize_message_is_refused_before_its_payload(
    broker: BrokerProcess, web: tuple[str, int]
) -> None:
    """A frame header announcing 1 GiB gets ERROR and close 1009 at once, with no payload sent."""
    client = RawWebSocket(web)
    try:
        assert client.status == 101
        client.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        client.socket.sendall(client_frame(b"", length=1 << 30))
        frames = client.read_frames()
        [connected, error] = client.stomp(frames)
        assert (connected.command, error.command) == ("CONNECTED", "ERROR")
        assert error.get("message") == "frame too large: more than 104857600 bytes"
        assert frames[-1] == (OPCODE_CLOSE, struct.pack("!H", 1009))
    finally:
        client.close()


def test_unmasked_client_frame_is_a_websocket_protocol_error(web: tuple[str, int]) -> None:
    """RFC 6455 section 5.1: a server closes a connection whose client sends an unmasked frame."""
    client = RawWebSocket(web)
    try:
        payload = b"CONNECT\naccept-version:1.2\n\n\x00"
        client.socket.sendall(bytes([0x81, len(payload)]) + payload)
        frames = client.read_frames()
        assert frames[-1][0] == OPCODE_CLOSE
        assert struct.unpack("!H", frames[-1][1][:2]) == (1002,)
        assert client.closed_by_peer()
    finally:
        client.close()


def get(web: tuple[str, int], path: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(*web, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_healthz_says_ok(web: tuple[str, int]) -> None:
    """/healthz answers 200 with a JSON status while the broker runs."""
    status, headers, body = get(web, "/healthz")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    assert headers["content-type"] == "application/json"


def test_demo_page_and_vendored_stompjs_are_served(web: tuple[str, int]) -> None:
    """
    / is the demo page, and the stompjs release it loads is served byte for byte as JavaScript.
    """
    status, headers, page = get(web, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"static/vendor/stompjs/stomp.umd.min.js" in page
    status, headers, script = get(web, "/static/vendor/stompjs/stomp.umd.min.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    assert script == (STATIC / "vendor/stompjs/stomp.umd.min.js").read_bytes()
    assert get(web, "/static/")[0] == 404


APP_ORIGIN = "https://app.example.com"


@pytest.fixture(scope="module")
def origins_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose WebSocket endpoint takes pages of APP_ORIGIN and its own."""
    workdir = tmp_path_factory.mktemp("origins")
    with BrokerProcess(workdir, "--allowed-origin", APP_ORIGIN, "--data-dir", "none") as process:
        yield process


def handshake_status(broker: BrokerProcess, origin: str | None, host: str) -> int:
    """:returns: the status of a handshake from a page of ``origin`` (none: not a browser)."""
    headers = () if origin is None else (("Origin", origin),)
    request = handshake_request(host=host, headers=headers)
    client = RawWebSocket(("127.0.0.1", broker.http_port), request)
    client.socket.close()
    return int(client.status)


def test_allowed_origins_own_pages_and_non_browsers_get_the_websocket(
    origins_broker: BrokerProcess,
) -> None:
    """
    --allowed-origin: a page of that origin, of the broker itself (its Host), or a
    client that sends no Origin is upgraded; a page of any other origin, or a page
    opened as a file (Origin ``null``), gets 403.
    """
    host = f"127.0.0.1:{origins_broker.http_port}"
    assert handshake_status(origins_broker, APP_ORIGIN, host) == 101
    assert handshake_status(origins_broker, f"http://{host}", host) == 101
    assert handshake_status(origins_broker, None, host) == 101
    assert handshake_status(origins_broker, "https://evil.test", host) == 403
    assert handshake_status(origins_broker, "null", host) == 403


def test_without_allowed_origins_any_page_gets_the_websocket(broker: BrokerProcess) -> None:
    """
    No --allowed-origin: the handshake takes any origin, as RabbitMQ Web-STOMP does,
    and ``null``, the origin of a page opened as a file.
    """
    host = f"127.0.0.1:{broker.http_port}"
    assert handshake_status(broker, "https://evil.test", host) == 101
    assert handshake_status(broker, "null", host) == 101
