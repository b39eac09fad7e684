"""
Webhooks end to end (docs/backend.md, "Webhooks"): a real ``twistd`` broker
with ``--webhook`` pointed at an application's HTTP server in this process,
``stomp.py`` clients coming and going, the signature checked, a failing
application retried.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import connect
from tests.support.process import BrokerProcess, free_port

pytestmark = pytest.mark.integration

SECRET = b"an-application-secret-0123456789"


class Application(ThreadingHTTPServer):
    """The application's server: keeps each POST, answers the statuses given, then 200."""

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.posts: list[tuple[bytes, str]] = []
        self.statuses: list[int] = []
        self.changed = threading.Condition()

    def events(self) -> list[tuple[str, str]]:
        with self.changed:
            posts = list(self.posts)
        return [
            (event["name"], event.get("member", {}).get("id", ""))
            for body, _ in posts
            for event in json.loads(body)["events"]
        ]

    def wait_for(self, count: int, timeout: float = 15.0) -> list[tuple[str, str]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.events()
            if len(found) >= count:
                return found
            time.sleep(0.05)
        return self.events()


class Handler(BaseHTTPRequestHandler):
    server: Application

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        with self.server.changed:
            if status == 200:
                self.server.posts.append((body, self.headers["X-Stompbroker-Signature"]))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        """Quiet: the test reads what it needs."""


@pytest.fixture
def application() -> Iterator[Application]:
    app = Application(free_port())
    thread = threading.Thread(target=app.serve_forever, daemon=True)
    thread.start()
    try:
        yield app
    finally:
        app.shutdown()
        app.server_close()


def test_webhooks_tell_the_application_signed_and_retried(
    application: Application, tmp_path: Path
) -> None:
    (tmp_path / "secret").write_bytes(SECRET + b"\n")
    application.statuses = [500]  # the first post fails: it is made again
    broker = BrokerProcess(
        tmp_path / "broker",
        "--webhook",
        f"http://127.0.0.1:{application.server_port}/hooks",
        "--webhook-secret-file",
        str(tmp_path / "secret"),
        "--data-dir",
        "none",
        "--auth",
        "memory:alice:x",
    )
    try:
        alice, inbox = connect(broker.address, login="alice", passcode="x")
        alice.subscribe("/topic/chat.room1", id="r", ack="auto", receipt="r")
        assert inbox.wait_for(lambda: "r" in inbox.receipts)
        assert application.wait_for(2) == [
            ("destination_occupied", ""),
            ("member_added", "alice"),
        ]
        alice.disconnect()
        assert application.wait_for(4)[2:] == [
            ("member_removed", "alice"),
            ("destination_vacated", ""),
        ]
        for body, header in application.posts:
            expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(header, expected)
            for event in json.loads(body)["events"]:
                assert event["destination"] == "/topic/chat.room1"
        log = broker.log_path.read_text()
        assert log.count("webhook delivery failed") == 1
        assert "webhooks delivered again" in log
    finally:
        broker.stop()
