"""
Token logins on the real broker: ``--auth jwt:jwks=FILE:audience=...:issuer=...``
without an access file, driven by ``stomp.py``, raw sockets and a WebSocket client.

Tokens are signed here with keys the broker knows from a JSON Web Key Set; the
broker's clock is the real one, so expiry takes real seconds (a few).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import stomp

from tests.support import tokens
from tests.support.clients import Collector, RawClient
from tests.support.process import BrokerProcess
from tests.support.websocket import RawWebSocket, handshake_request


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that takes tokens from key r1 (RSA) and e1 (EC), and nothing else."""
    workdir = tmp_path_factory.mktemp("tokens")
    keys = tokens.key_set(workdir / "jwks.json")
    process = BrokerProcess(
        workdir,
        "--auth",
        f"jwt:jwks={keys}:audience={tokens.AUDIENCE}:issuer={tokens.ISSUER}",
        "--data-dir",
        "none",
        "--heartbeat",
        "0,0",
    )
    yield process
    process.stop()


def token(lifetime: float = 3600, **overrides: object) -> str:
    """A token for alice from key r1, issued now, valid for ``lifetime`` seconds."""
    now = time.time()
    return tokens.make_token(now, kid="r1", exp=int(now + lifetime), **overrides)


def login(broker: BrokerProcess, passcode: str) -> tuple[stomp.Connection12, Collector]:
    """A ``stomp.py`` connection that sends the token as its passcode, with an empty login."""
    connection = stomp.Connection12([broker.address], auto_decode=False)
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect("", passcode, wait=True)
    return connection, collector


def subscribed(broker: BrokerProcess, destination: str) -> tuple[stomp.Connection12, Collector]:
    connection, collector = login(broker, token())
    connection.subscribe(destination, id="0", receipt="s")
    assert collector.wait_for(lambda: "s" in collector.receipts)
    return connection, collector


def test_stomp_py_logs_in_with_a_token_and_uses_its_scopes(broker: BrokerProcess) -> None:
    """A token as passcode logs in; its scopes let it subscribe and send to prices."""
    connection, collector = subscribed(broker, "/topic/prices.eur")
    connection.send("/topic/prices.eur", b"1.08")
    assert collector.wait_for(lambda: collector.bodies() == [b"1.08"])
    connection.disconnect()
    assert "login of alice from 127.0.0.1" in broker.log()


BAD_TOKENS: list[tuple[str, Callable[[], str], str]] = [
    ("expired", lambda: token(lifetime=-30), "token expired"),
    ("wrong audience", lambda: token(aud="another-api"), "wrong audience"),
    ("wrong issuer", lambda: token(iss="https://evil.example"), "wrong issuer"),
    (
        "bad signature",
        lambda: tokens.make_token(time.time(), tokens.rsa_key("forger"), kid="r1"),
        "bad signature",
    ),
    (
        "unknown key id",
        lambda: tokens.make_token(time.time(), tokens.rsa_key("forger"), kid="r9"),
        "unknown key id",
    ),
    ("alg none", lambda: tokens.unsigned_token(time.time()), "unsigned token"),
]


@pytest.mark.parametrize(("case", "make", "reason"), BAD_TOKENS, ids=[c[0] for c in BAD_TOKENS])
def test_bad_token_gets_a_clear_error_and_publishes_nothing(
    broker: BrokerProcess, case: str, make: Callable[[], str], reason: str
) -> None:
    """Each bad token: ERROR "login failed: <reason>", a close, and its SEND goes nowhere."""
    reader, collector = subscribed(broker, "/topic/prices.eur")
    bad = make()
    client = RawClient(broker.address)
    client.send(
        f"CONNECT\naccept-version:1.2\nhost:/\npasscode:{bad}\n\n\x00".encode()
        + b"SEND\ndestination:/topic/prices.eur\n\nforged\x00"
    )
    [error] = client.read_frames(count=1)
    assert (error.command, error.get("message")) == ("ERROR", f"login failed: {reason}")
    assert client.closed_by_peer()
    client.close()
    writer, _ = login(broker, token(sub="bob"))
    writer.send("/topic/prices.eur", b"marker")
    assert collector.wait_for(lambda: collector.bodies() == [b"marker"])
    reader.disconnect()
    writer.disconnect()
    assert bad not in broker.log()
    assert "login failed for (anonymous) from 127.0.0.1" in broker.log()


def test_token_renewal_keeps_a_connection_past_its_first_expiry(broker: BrokerProcess) -> None:
    """
    Two connections whose tokens expire in 3 s: the one that sends a fresh token to
    /control/credentials stays and still publishes; the other gets "credentials expired".
    """
    renewing, renewing_inbox = login(broker, token(lifetime=3))
    lapsing, lapsing_inbox = login(broker, token(lifetime=3))
    renewing.subscribe("/topic/prices.eur", id="0", receipt="s")
    assert renewing_inbox.wait_for(lambda: "s" in renewing_inbox.receipts)
    renewing.send("/control/credentials", token(lifetime=3600).encode(), receipt="renewed")
    assert renewing_inbox.wait_for(lambda: "renewed" in renewing_inbox.receipts)
    assert lapsing_inbox.wait_for(lambda: lapsing_inbox.errors, timeout=6)
    assert lapsing_inbox.errors[0].headers["message"] == "credentials expired"
    renewing.send("/topic/prices.eur", b"still here")
    assert renewing_inbox.wait_for(lambda: renewing_inbox.bodies() == [b"still here"])
    assert renewing_inbox.errors == []
    renewing.disconnect()


def test_websocket_client_logs_in_with_a_token(broker: BrokerProcess) -> None:
    """Over WebSocket, a token works as CONNECT's passcode (stompjs) and as a Bearer header."""
    web = ("127.0.0.1", broker.http_port)
    by_passcode = RawWebSocket(web)
    by_passcode.send(f"CONNECT\naccept-version:1.2\nhost:/\npasscode:{token()}\n\n\x00".encode())
    request = handshake_request(headers=(("Authorization", f"Bearer {token()}"),))
    by_header = RawWebSocket(web, request=request)
    by_header.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    try:
        for websocket in (by_passcode, by_header):
            [connected] = websocket.read_stomp(1)
            assert connected.command == "CONNECTED"
    finally:
        by_passcode.close()
        by_header.close()
