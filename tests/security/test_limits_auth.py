"""
Tests of authentication and authorization as the broker applies them, without sockets.

Logins go through the real portal (:func:`stompbroker.security.portal.make_portal` over
strcred's ``memory`` checker) and :class:`stompbroker.security.portal.Authenticator`;
the failure delay runs on a ``task.Clock``; rights come from a real access file
(:class:`stompbroker.security.access_file.AccessControl`).  Connections are the real TCP
adapter, session and broker on string transports (:class:`tests.support.tcp.Client`).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from twisted.cred import strcred
from twisted.cred.checkers import AllowAnonymousAccess
from twisted.cred.credentials import IAnonymous
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import formatEvent
from twisted.python import usage

from stompbroker.app.services import ReloadOnHangup
from stompbroker.app.tap import makeService
from stompbroker.broker.service import Broker
from stompbroker.protocol.session import SessionConfig, State
from stompbroker.security.access_file import AccessControl
from stompbroker.security.http_auth import HttpAnonymousChecker
from stompbroker.security.identity import Identity
from stompbroker.security.portal import FAILED_LOGIN_DELAY, Authenticator, make_portal
from stompbroker.transport.tcp import StompServerFactory, stomp_server_factory
from tests.support.options import parse
from tests.support.tcp import NO_WATERMARK, Client

ACCESS = """
[anonymous]
read = ["/topic/public.#"]

[users.alice]
read = ["/topic/prices.#"]
write = ["/topic/prices.eur", "/queue/orders"]
"""


@pytest.fixture
def access_file(tmp_path: Path) -> Path:
    path = tmp_path / "access.toml"
    path.write_text(ACCESS, encoding="utf-8")
    return path


def secured(
    clock: Clock,
    access: AccessControl | None = None,
    allow_anonymous: bool = False,
    authenticator: Any = None,
) -> tuple[Broker, StompServerFactory]:
    """A broker whose clients log in as alice (password "secret") or bob ("builder")."""
    if authenticator is None:
        portal = make_portal(
            [strcred.makeChecker("memory:alice:secret:bob:builder")], allow_anonymous
        )
        authenticator = Authenticator(portal, clock)
    config = SessionConfig(heartbeat=(0, 0), authenticator=authenticator, access=access)
    broker = Broker(clock, limits=NO_WATERMARK)
    return broker, stomp_server_factory(broker, clock, config)


def login(client: Client, user: str, password: str) -> None:
    client.send(
        "CONNECT", ("accept-version", "1.2"), ("host", "/"), ("login", user), ("passcode", password)
    )


# -- authentication ------------------------------------------------------------------


def test_right_password_connects_with_the_identity() -> None:
    """CONNECT's login and passcode go through the portal; the session keeps the identity."""
    clock = Clock()
    _, factory = secured(clock)
    client = Client(factory)
    login(client, "alice", "secret")
    assert [frame.command for frame in client.frames()] == ["CONNECTED"]
    assert client.session.identity == Identity("alice")


def test_wrong_password_gets_login_failed_after_the_delay_then_a_close(
    log_events: list[dict[str, Any]],
) -> None:
    """A refused login gets ERROR "login failed" after the delay; no passcode is logged."""
    clock = Clock()
    broker, factory = secured(clock)
    client = Client(factory)
    login(client, "alice", "hunter2")
    assert client.frames() == [] and not client.closed
    assert client.session.state is State.AUTHENTICATING
    clock.advance(FAILED_LOGIN_DELAY)
    error = client.error()
    assert (error.get("message"), error.body) == ("login failed", b"login failed")
    assert broker.connections == set()
    logged = " ".join(formatEvent(event) for event in log_events)
    assert "login failed for alice from 127.0.0.1:40000" in logged
    assert "hunter2" not in logged and "hunter2" not in repr(log_events)


def test_anonymous_connect_is_refused_with_auth_unless_allowed() -> None:
    """With --auth, a CONNECT without login fails, unless anonymous access is allowed."""
    clock = Clock()
    _, factory = secured(clock)
    refused = Client(factory)
    refused.send("CONNECT", ("accept-version", "1.2"))
    clock.advance(FAILED_LOGIN_DELAY)
    assert refused.error().get("message") == "login failed"
    _, factory = secured(clock, allow_anonymous=True)
    allowed = Client(factory)
    assert allowed.connect().command == "CONNECTED"
    assert allowed.session.identity.anonymous


def test_frames_sent_with_connect_wait_for_the_login() -> None:
    """Frames pipelined behind CONNECT are handled after CONNECTED; nothing is read meanwhile."""
    clock = Clock()
    answer: Deferred[Identity] = Deferred()
    _, factory = secured(clock, authenticator=lambda login, passcode, peer: answer)
    publisher = Client(factory)
    publisher.send_bytes(
        b"CONNECT\naccept-version:1.2\nlogin:alice\npasscode:secret\n\n\x00"
        b"SUBSCRIBE\nid:0\ndestination:/topic/a\nreceipt:sub\n\n\x00"
        b"SEND\ndestination:/topic/a\n\nmine\x00"
    )
    assert publisher.frames() == []
    assert publisher.transport.producerState == "paused"
    answer.callback(Identity("alice"))
    frames = publisher.frames()
    assert [frame.command for frame in frames] == ["CONNECTED", "RECEIPT", "MESSAGE"]
    assert frames[2].body == b"mine"
    assert publisher.transport.producerState == "producing"


def test_client_leaving_during_login_cancels_it() -> None:
    """A connection lost while its password is checked cancels the check; no timer is left."""
    clock = Clock()
    broker, factory = secured(clock)
    client = Client(factory)
    login(client, "alice", "wrong")
    client.transport.loseConnection()
    assert clock.getDelayedCalls() == []
    assert broker.connections == set()


def test_login_that_takes_longer_than_the_connect_timeout_is_cut_off() -> None:
    """The connect timeout covers the login: a check that never answers ends the connection."""
    clock = Clock()
    never: Deferred[Identity] = Deferred()
    _, factory = secured(clock, authenticator=lambda login, passcode, peer: never)
    client = Client(factory)
    login(client, "alice", "secret")
    clock.advance(SessionConfig().connect_timeout)
    assert client.error().get("message") == "connect timeout"
    assert never.called


def test_access_rules_need_an_authenticator() -> None:
    """Rights need identities: an access control without an authenticator is refused."""
    with pytest.raises(ValueError, match="authenticator"):
        SessionConfig(access=AccessControl())


# -- authorization -------------------------------------------------------------------


def test_denied_send_names_destination_and_right_and_publishes_nothing(access_file: Path) -> None:
    """A SEND without the write right gets an ERROR naming both, with receipt-id; nothing routed."""
    clock = Clock()
    broker, factory = secured(clock, AccessControl(str(access_file)), allow_anonymous=True)
    watcher = Client(factory, port=1)
    watcher.connect()
    watcher.send("SUBSCRIBE", ("id", "0"), ("destination", "/topic/public.news"))
    client = Client(factory, port=2)
    login(client, "alice", "secret")
    client.frames()
    client.send("SEND", ("destination", "/topic/public.news"), ("receipt", "7"), body=b"x")
    error = client.error()
    assert error.get("message") == "access denied: no write right on '/topic/public.news'"
    assert error.get("receipt-id") == "7"
    assert b"user 'alice' may not send to '/topic/public.news'" in error.body
    assert watcher.frames() == []


def test_denied_subscribe_subscribes_nothing(access_file: Path) -> None:
    """A SUBSCRIBE without the read right, or with a wildcard no rule covers, is refused."""
    clock = Clock()
    broker, factory = secured(clock, AccessControl(str(access_file)))
    client = Client(factory)
    login(client, "alice", "secret")
    client.send("SUBSCRIBE", ("id", "0"), ("destination", "/topic/prices.*.spot"))
    client.send("SUBSCRIBE", ("id", "1"), ("destination", "/topic/#"))
    error = client.error()
    assert error.get("message") == "access denied: no read right on '/topic/#'"
    assert not list(broker.engine.topics.match("/topic/x"))


def test_allowed_frames_go_through(access_file: Path) -> None:
    """SEND and SUBSCRIBE with their rights work as without an access file."""
    clock = Clock()
    _, factory = secured(clock, AccessControl(str(access_file)))
    client = Client(factory)
    login(client, "alice", "secret")
    client.send("SUBSCRIBE", ("id", "0"), ("destination", "/topic/prices.#"))
    client.send("SEND", ("destination", "/topic/prices.eur"), body=b"1.08")
    assert [frame.command for frame in client.frames()] == ["CONNECTED", "MESSAGE"]


def test_reloaded_rules_apply_to_connected_clients(access_file: Path) -> None:
    """Rights are checked frame by frame: after a reload, a connected client meets the new rules."""
    clock = Clock()
    access = AccessControl(str(access_file))
    _, factory = secured(clock, access)
    client = Client(factory)
    login(client, "alice", "secret")
    client.send("SEND", ("destination", "/queue/orders"), ("receipt", "1"))
    assert [frame.command for frame in client.frames()] == ["CONNECTED", "RECEIPT"]
    access_file.write_text('[users.alice]\nwrite = ["/topic/prices.eur"]\n', encoding="utf-8")
    ReloadOnHangup(access, MemoryReactorClock()).reload()
    client.send("SEND", ("destination", "/queue/orders"))
    assert client.error().get("message") == "access denied: no write right on '/queue/orders'"


def test_invalid_reloaded_file_keeps_the_old_rules(
    access_file: Path, log_events: list[dict[str, Any]]
) -> None:
    """A reload that finds the file invalid logs why, and the rules in force stay."""
    access = AccessControl(str(access_file))
    before = access.policy
    access_file.write_text("[users.alice\n", encoding="utf-8")
    ReloadOnHangup(access, MemoryReactorClock()).reload()
    assert access.policy is before
    assert "access file not reloaded" in " ".join(formatEvent(event) for event in log_events)


def test_sighup_reloads_through_the_reactor(access_file: Path) -> None:
    """SIGHUP schedules a reload in the reactor thread; stopping restores the previous handler."""
    reactor = MemoryReactorClock()
    reloaded: list[bool] = []
    service = ReloadOnHangup(AccessControl(str(access_file)), reactor)
    service.reload = lambda: reloaded.append(True)  # type: ignore[method-assign]
    previous = signal.getsignal(signal.SIGHUP)
    reactor.callFromThread = lambda function, *args: function(*args)  # type: ignore[method-assign]
    service.startService()
    try:
        signal.raise_signal(signal.SIGHUP)
    finally:
        service.stopService()
    assert reloaded == [True]
    assert signal.getsignal(signal.SIGHUP) == previous


# -- options -------------------------------------------------------------------------


def stomp_config(service: Any) -> SessionConfig:
    """:returns: the session configuration of the service's STOMP listener."""
    [config] = [
        child.factory.config
        for child in service
        if isinstance(getattr(child, "factory", None), StompServerFactory)
    ]
    return config


def test_security_options_are_wired_into_the_sessions(access_file: Path) -> None:
    """--auth, --allow-anonymous and --access reach every session; without them no check is made."""
    options = parse(
        "--port",
        "7000",
        "--http",
        "none",
        "--data-dir",
        "none",
        "--auth",
        "memory:alice:secret",
        "--allow-anonymous",
        "--access",
        str(access_file),
    )
    reactor = MemoryReactorClock()
    service = makeService(options, reactor=reactor)
    config = stomp_config(service)
    assert isinstance(config.authenticator, Authenticator)
    assert isinstance(config.access, AccessControl)
    assert service.getServiceNamed("access reload").access is config.access
    plain = makeService(
        parse("--port", "7000", "--http", "none", "--data-dir", "none"), reactor=reactor
    )
    config = stomp_config(plain)
    assert config.authenticator is None and config.access is None


def anonymous_checker_of(*argv: str) -> Any:
    """:returns: the checker the sessions' portal lets clients without a login in with."""
    options = parse("--port", "7000", "--http", "none", "--data-dir", "none", *argv)
    config = stomp_config(makeService(options, reactor=MemoryReactorClock()))
    return config.authenticator.portal.checkers[IAnonymous]


def test_anonymous_clients_of_an_http_application_get_its_rights(access_file: Path) -> None:
    """
    ``--auth http`` with ``--allow-anonymous`` and no ``--access``: the application
    decides for clients without a login too; with ``--access`` its ``[anonymous]`` rules do.
    """
    http = ("--auth", "http:http://127.0.0.1:9/stomp", "--allow-anonymous")
    assert isinstance(anonymous_checker_of(*http), HttpAnonymousChecker)
    assert isinstance(
        anonymous_checker_of(*http, "--access", str(access_file)), AllowAnonymousAccess
    )
    assert isinstance(
        anonymous_checker_of("--auth", "memory:alice:secret", "--allow-anonymous"),
        AllowAnonymousAccess,
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--allow-anonymous"], "--allow-anonymous goes with --auth"),
        (
            ["--access", "/nonexistent/access.toml"],
            "--access: /nonexistent/access.toml: cannot read it",
        ),
        (["--auth", "nosuch:thing"], "Auth plugin not recognized"),
    ],
)
def test_bad_security_options_are_usage_errors(argv: list[str], message: str) -> None:
    """Security options that cannot work are refused at start, with a usage error saying why."""
    with pytest.raises(usage.UsageError, match=message):
        parse(*argv)
