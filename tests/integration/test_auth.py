"""
Logins and rights on the real broker: ``--auth passwd:FILE``, ``--access FILE``, and a
reload of the access file on SIGHUP, driven by ``stomp.py`` and raw sockets.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from tests.support.clients import Collector, RawClient, connect
from tests.support.passwords import secured_module
from tests.support.process import BrokerProcess

ACCESS = """
[users.alice]
read = ["/topic/prices.#"]
write = ["/topic/prices.#"]

[groups.auditors]
read = ["/topic/#"]
"""


#: alice (password "wonderland") and bob, an auditor ("builder").
secured = secured_module(ACCESS, ("alice", "wonderland", ()), ("bob", "builder", ("auditors",)))


def login(broker: BrokerProcess, user: str, password: str) -> tuple[Any, Collector]:
    return connect(broker.address, login=user, passcode=password)


def raw_login(broker: BrokerProcess, *headers: str) -> RawClient:
    client = RawClient(broker.address)
    lines = ["CONNECT", "accept-version:1.2", "host:/", *headers]
    client.send(("\n".join(lines) + "\n\n\x00").encode())
    return client


def test_user_with_rights_publishes_and_subscribes(secured: BrokerProcess) -> None:
    """A user logs in with the password file and uses the destinations the access file gives."""
    connection, collector = login(secured, "alice", "wonderland")
    connection.subscribe("/topic/prices.eur", id="0", receipt="s")
    assert collector.wait_for(lambda: "s" in collector.receipts)
    connection.send("/topic/prices.eur", b"1.08")
    assert collector.wait_for(lambda: collector.bodies() == [b"1.08"])
    connection.disconnect()


def test_wrong_password_gets_login_failed_after_a_delay(secured: BrokerProcess) -> None:
    """A refused login gets ERROR "login failed", nothing more, a second later, then a close."""
    started = time.monotonic()
    client = raw_login(secured, "login:alice", "passcode:guessing")
    [error] = client.read_frames(count=1)
    assert time.monotonic() - started >= 0.9
    assert (error.command, error.get("message"), error.body) == (
        "ERROR",
        "login failed",
        b"login failed",
    )
    assert client.closed_by_peer()
    client.close()
    assert "guessing" not in secured.log()
    assert "login failed for alice from 127.0.0.1" in secured.log()


def test_anonymous_client_is_refused_with_auth(secured: BrokerProcess) -> None:
    """With --auth and without --allow-anonymous, a CONNECT without login does not get in."""
    client = raw_login(secured)
    [error] = client.read_frames(count=1)
    assert error.get("message") == "login failed"
    client.close()


def test_denied_send_names_the_destination_and_the_right(secured: BrokerProcess) -> None:
    """A SEND outside the user's rights gets an ERROR naming destination and right only."""
    auditor, collector = login(secured, "bob", "builder")
    auditor.subscribe("/topic/#", id="all", receipt="s")
    assert collector.wait_for(lambda: "s" in collector.receipts)
    client = raw_login(secured, "login:alice", "passcode:wonderland")
    assert client.read_frames(count=1)[0].command == "CONNECTED"
    client.send(b"SEND\ndestination:/topic/news\nreceipt:7\n\nsecret\x00")
    [error] = client.read_frames(count=1)
    assert error.get("message") == "access denied: no write right on '/topic/news'"
    assert error.get("receipt-id") == "7"
    assert client.closed_by_peer()
    client.close()
    # Anything the refused SEND had published would reach the auditor before this.
    publisher, _ = login(secured, "alice", "wonderland")
    publisher.send("/topic/prices.after", b"after")
    assert collector.wait_for(lambda: collector.bodies() == [b"after"])
    publisher.disconnect()
    auditor.disconnect()


def test_sighup_reloads_the_rules_for_connected_clients(secured: BrokerProcess) -> None:
    """After SIGHUP a changed access file applies to a client that was connected before."""
    connection, collector = login(secured, "alice", "wonderland")
    connection.send("/topic/prices.usd", b"1", receipt="before")
    assert collector.wait_for(lambda: "before" in collector.receipts)
    access = secured.workdir / "access.toml"
    access.write_text(ACCESS.replace('write = ["/topic/prices.#"]', "write = []"))
    try:
        secured.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while "access file" not in secured.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"access file {access} reloaded" in secured.log()
        connection.send("/topic/prices.usd", b"2", receipt="after")
        assert collector.wait_for(lambda: collector.errors)
        assert collector.errors[0].headers["message"] == (
            "access denied: no write right on '/topic/prices.usd'"
        )
    finally:
        access.write_text(ACCESS)
        secured.process.send_signal(signal.SIGHUP)
