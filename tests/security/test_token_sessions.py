"""
Token logins through the whole stack without sockets: the real TCP and WebSocket
adapters, session, portal, token checker and broker, on string transports, with
time on one ``task.Clock`` that both the checker and the sessions read.

Each bad token must end its connection with an ERROR that says why, and nothing
the client sent with it may reach a subscriber.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock

from stompbroker.app.tap import makeService
from stompbroker.broker.service import Broker
from stompbroker.protocol.session import SessionConfig
from stompbroker.security.access_file import AccessControl
from stompbroker.security.portal import FAILED_LOGIN_DELAY, Authenticator, make_portal
from stompbroker.security.tokens import make_checker
from stompbroker.transport.tcp import stomp_server_factory
from tests.support import websocket as ws
from tests.support.options import parse
from tests.support.tcp import NO_WATERMARK, Client
from tests.support.tokens import (
    AUDIENCE,
    ISSUER,
    NOW,
    key_set,
    make_token,
    rsa_key,
    unsigned_token,
)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    """A key set with an RSA key ``r1`` and an EC key ``e1``."""
    return key_set(tmp_path / "jwks.json")


@pytest.fixture
def config(keys: Path, clock: Clock) -> SessionConfig:
    """How twistd configures sessions for ``--auth jwt:jwks=...`` without an access file."""
    checker = make_checker(f"jwks={keys}:audience={AUDIENCE}:issuer={ISSUER}", clock=clock)
    authenticator = Authenticator(make_portal([checker]), clock)
    return SessionConfig(heartbeat=(0, 0), authenticator=authenticator, access=AccessControl())


@pytest.fixture
def factory(config: SessionConfig, clock: Clock) -> Any:
    return stomp_server_factory(Broker(clock, limits=NO_WATERMARK), clock, config)


def token(**overrides: Any) -> str:
    """A token for alice from key r1, valid for an hour from :data:`NOW`."""
    return make_token(NOW, kid="r1", **overrides)


def logged_in(factory: Any, passcode: str, port: int = 40000) -> Client:
    client = Client(factory, port=port)
    answer = client.connect(("passcode", passcode))
    assert answer.command == "CONNECTED", answer
    return client


def subscriber(factory: Any, destination: str = "/topic/prices.eur") -> Client:
    """A client of alice's that receives ``destination`` (read right from the token's scopes)."""
    client = logged_in(factory, token(), port=40999)
    client.send("SUBSCRIBE", ("id", "0"), ("destination", destination), ("receipt", "s"))
    [receipt] = client.frames()
    assert receipt.command == "RECEIPT"
    return client


def test_token_login_publishes_within_its_scopes(factory: Any) -> None:
    """A token's read and write scopes let its holder subscribe and send there."""
    reader = subscriber(factory)
    writer = logged_in(factory, token(sub="bob"))
    writer.send("SEND", ("destination", "/topic/prices.eur"), body=b"1.08")
    [message] = reader.frames()
    assert message.body == b"1.08"


def test_scopes_limit_what_a_token_may_do_without_an_access_file(factory: Any) -> None:
    """Outside its scopes a token's holder is refused, even though no access file exists."""
    client = logged_in(factory, token())
    client.send("SEND", ("destination", "/topic/prices.usd"), ("receipt", "7"))
    error = client.error()
    assert error.get("message") == "access denied: no write right on '/topic/prices.usd'"
    assert b"the token's scopes give no write right" in error.body


BAD_TOKENS: list[tuple[str, Callable[[], str], str]] = [
    ("expired", lambda: token(exp=int(NOW) - 10), "token expired"),
    ("wrong audience", lambda: token(aud="another-api"), "wrong audience"),
    ("wrong issuer", lambda: token(iss="https://evil.example"), "wrong issuer"),
    ("bad signature", lambda: make_token(NOW, rsa_key("forger"), kid="r1"), "bad signature"),
    ("unknown key id", lambda: make_token(NOW, rsa_key("forger"), kid="r9"), "unknown key id"),
    ("alg none", lambda: unsigned_token(NOW), "unsigned token"),
]


@pytest.mark.parametrize(("case", "make", "reason"), BAD_TOKENS, ids=[c[0] for c in BAD_TOKENS])
def test_bad_token_gets_a_clear_error_and_publishes_nothing(
    factory: Any, clock: Clock, case: str, make: Callable[[], str], reason: str
) -> None:
    """Each bad token: ERROR "login failed: <reason>" after the delay, and its SEND goes nowhere."""
    reader = subscriber(factory)
    client = Client(factory)
    client.send("CONNECT", ("accept-version", "1.2"), ("host", "/"), ("passcode", make()))
    client.send("SEND", ("destination", "/topic/prices.eur"), body=b"forged")
    assert client.frames() == []
    clock.advance(FAILED_LOGIN_DELAY)
    error = client.error()
    assert error.get("message") == f"login failed: {reason}"
    assert reader.frames() == []


def test_connection_ends_when_its_token_expires(factory: Any, clock: Clock) -> None:
    """At the token's exp the broker sends ERROR "credentials expired" and closes."""
    client = logged_in(factory, token(exp=int(NOW) + 30))
    clock.advance(29)
    assert not client.closed
    clock.advance(1)
    assert client.error().get("message") == "credentials expired"


def test_renewed_token_keeps_the_connection_and_brings_its_rights(
    factory: Any, clock: Clock
) -> None:
    """A fresh token sent to /control/credentials: RECEIPT, a later expiry, and its own scopes."""
    reader = subscriber(factory, "/topic/prices.usd")
    client = logged_in(factory, token(exp=int(NOW) + 30))
    wider = token(exp=int(NOW) + 300, scope="stompbroker.write:/topic/prices.*")
    client.send(
        "SEND", ("destination", "/control/credentials"), ("receipt", "r"), body=wider.encode()
    )
    [receipt] = client.frames()
    assert receipt.get("receipt-id") == "r"
    clock.advance(60)
    client.send("SEND", ("destination", "/topic/prices.usd"), body=b"1.27")
    assert [frame.body for frame in reader.frames()] == [b"1.27"]
    clock.advance(240)
    assert client.error().get("message") == "credentials expired"


def test_refused_renewal_names_the_reason(factory: Any, clock: Clock) -> None:
    """An expired token sent as renewal ends it: ERROR "credentials refused: token expired"."""
    client = logged_in(factory, token())
    stale = token(exp=int(NOW) - 1).encode()
    client.send("SEND", ("destination", "/control/credentials"), ("receipt", "r"), body=stale)
    clock.advance(FAILED_LOGIN_DELAY)
    error = client.error()
    assert (error.get("message"), error.get("receipt-id")) == (
        "credentials refused: token expired",
        "r",
    )


def test_websocket_authorization_header_logs_in(config: SessionConfig, clock: Clock) -> None:
    """A WebSocket handshake with Authorization: Bearer logs in a CONNECT without passcode."""
    websocket = ws.Client(
        ws.make_factory(clock, Broker(clock, limits=NO_WATERMARK), config, ws.NO_PINGS),
        headers=(("Authorization", f"Bearer {token()}"),),
    )
    assert websocket.status == 101
    assert websocket.connect().command == "CONNECTED"
    assert websocket.protocol.session.identity.name == "alice"


def test_twistd_enforces_scopes_without_an_access_file(keys: Path) -> None:
    """--auth jwt:... alone gives sessions access rules, so that scopes hold."""
    options = parse("--auth", f"jwt:jwks={keys}:audience={AUDIENCE}", "--http", "none")
    assert isinstance(options["access-control"], AccessControl)
    service = makeService(options, reactor=MemoryReactorClock())
    names = [child.name for child in service]
    assert "access reload" not in names


RENEWAL_REFUSALS = [*BAD_TOKENS, ("another user", lambda: token(sub="mallory"), "another user")]


@pytest.mark.parametrize(
    ("case", "make", "reason"), RENEWAL_REFUSALS, ids=[c[0] for c in RENEWAL_REFUSALS]
)
def test_every_refused_renewal_names_why_and_the_frames_after_it_go_nowhere(
    factory: Any, clock: Clock, case: str, make: Callable[[], str], reason: str
) -> None:
    """
    Each bad new token: ERROR "credentials refused: <reason>", a close, and the SEND after it
    (which waits for the answer) reaches no subscriber.
    """
    reader = subscriber(factory)
    client = logged_in(factory, token())
    client.send("SEND", ("destination", "/control/credentials"), body=make().encode())
    client.send("SEND", ("destination", "/topic/prices.eur"), body=b"after a bad renewal")
    clock.advance(FAILED_LOGIN_DELAY)
    assert client.error().get("message") == f"credentials refused: {reason}"
    assert reader.frames() == []


@pytest.mark.parametrize(("case", "make", "reason"), BAD_TOKENS, ids=[c[0] for c in BAD_TOKENS])
def test_bad_token_in_the_websocket_authorization_header_is_refused_naming_why(
    config: SessionConfig, clock: Clock, case: str, make: Callable[[], str], reason: str
) -> None:
    """A bad Bearer token in the handshake: ERROR "login failed: <reason>", and nothing is sent."""
    broker = Broker(clock, limits=NO_WATERMARK)
    reader = subscriber(stomp_server_factory(broker, clock, config))
    websocket = ws.Client(
        ws.make_factory(clock, broker, config, ws.NO_PINGS),
        headers=(("Authorization", f"Bearer {make()}"),),
    )
    assert websocket.status == 101
    websocket.send(ws.CONNECT + b"SEND\ndestination:/topic/prices.eur\n\nforged\x00")
    clock.advance(FAILED_LOGIN_DELAY)
    frames = websocket.received()
    [error] = websocket.stomp(frames)
    assert (error.command, error.get("message")) == ("ERROR", f"login failed: {reason}")
    assert frames[-1][0] == ws.OPCODE_CLOSE
    assert reader.frames() == []
