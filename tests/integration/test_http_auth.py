"""
``--auth http:URL`` on the real broker: the example application of docs/security.md,
run as it is documented (a twisted.web server), decides who logs in and what they
may do; ``stomp.py`` and raw sockets are the clients.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import RawClient, connect
from tests.support.process import ROOT, BrokerProcess, free_port, subprocess_env, wait_for_port


def documented_application() -> str:
    """:returns: the ``python`` block of docs/security.md that serves the application."""
    text = (ROOT / "docs" / "security.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "render_POST" in b]
    return block


@pytest.fixture(scope="module")
def application(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The documented application, listening on a free loopback port."""
    workdir = tmp_path_factory.mktemp("app")
    script = workdir / "auth_app.py"
    script.write_text(documented_application())
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        cwd=workdir,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process=process)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, application: int) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("http-auth")
    url = f"http://127.0.0.1:{application}/stomp"
    with BrokerProcess(
        workdir, "--auth", f"http:{url}:cache=30", "--data-dir", "none", "--vhost", "shop"
    ) as process:
        yield process


def raw_login(broker: BrokerProcess, *headers: str, host: str = "/") -> RawClient:
    client = RawClient(broker.address)
    lines = ["CONNECT", "accept-version:1.2", f"host:{host}", *headers]
    client.send(("\n".join(lines) + "\n\n\x00").encode())
    return client


def stats(broker: BrokerProcess) -> dict[str, dict[str, int]]:
    """:returns: the counts of the broker's one ``--auth http:`` endpoint, per path."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/stats", timeout=10) as page:
        [document] = json.load(page)["http_auth"]
    assert document.pop("url").startswith("http://127.0.0.1:")
    counts: dict[str, dict[str, int]] = document
    return counts


def test_the_application_lets_alice_subscribe_and_publish(broker: BrokerProcess) -> None:
    """alice logs in by the application's answer, and uses the destinations it allows."""
    connection, collector = connect(broker.address, login="alice", passcode="wonderland")
    connection.subscribe("/topic/prices", id="0", receipt="s")
    assert collector.wait_for(lambda: "s" in collector.receipts)
    connection.send("/topic/prices", b"1.08")
    connection.send("/topic/prices", b"1.09")
    assert collector.wait_for(lambda: collector.bodies() == [b"1.08", b"1.09"])
    connection.disconnect()
    counts = stats(broker)
    assert counts["user"]["allowed"] >= 1
    assert counts["resource"]["allowed"] >= 2


def test_a_user_refused_on_a_virtual_host_is_allowed_on_the_default_one(
    broker: BrokerProcess,
) -> None:
    """
    The documented application lets alice use ``/`` only: her CONNECT to the
    configured virtual host ``shop`` is refused, her CONNECT to ``/`` is not.
    """
    refused = raw_login(broker, "login:alice", "passcode:wonderland", host="shop")
    [error] = refused.read_frames(count=1)
    assert (error.command, error.get("message")) == ("ERROR", "login failed: virtual host refused")
    assert b"virtual host 'shop'" in error.body
    assert refused.closed_by_peer()
    refused.close()
    allowed = raw_login(broker, "login:alice", "passcode:wonderland", host="/")
    assert allowed.read_frames(count=1)[0].command == "CONNECTED"
    allowed.close()
    counts = stats(broker)["vhost"]
    assert counts["denied"] >= 1
    assert counts["allowed"] >= 1


def test_a_wrong_passcode_is_refused(broker: BrokerProcess) -> None:
    """The application's deny is "login failed", and the connection closes."""
    client = raw_login(broker, "login:alice", "passcode:guessing")
    [error] = client.read_frames(count=1)
    assert (error.command, error.get("message")) == ("ERROR", "login failed")
    assert client.closed_by_peer()
    client.close()


def test_a_destination_the_application_refuses_is_an_error(broker: BrokerProcess) -> None:
    """A SUBSCRIBE the application does not allow ends the connection with access denied."""
    client = raw_login(broker, "login:alice", "passcode:wonderland")
    assert client.read_frames(count=1)[0].command == "CONNECTED"
    error = client.subscribe("/topic/secrets")
    assert error.get("message") == "access denied: no read right on '/topic/secrets'"
    assert error.get("receipt-id") == "s"
    assert client.closed_by_peer()
    client.close()
    assert stats(broker)["resource"]["denied"] >= 1


def test_an_endpoint_that_never_answers_refuses_logins(tmp_path: Path) -> None:
    """An endpoint that accepts connections but never answers: the login fails within timeout."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/stomp"
    try:
        with BrokerProcess(
            tmp_path, "--auth", f"http:{url}:timeout=0.5", "--data-dir", "none"
        ) as process:
            client = raw_login(process, "login:alice", "passcode:wonderland")
            [error] = client.read_frames(count=1)
            assert error.get("message") == "login failed: authorization unavailable"
            assert b"did not answer within 0.5 s" in error.body
            client.close()
            assert stats(process)["user"]["timeouts"] == 1
            assert "did not answer within 0.5 s" in process.log()
    finally:
        silent.close()
