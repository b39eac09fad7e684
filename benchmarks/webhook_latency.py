"""
How soon the application hears of a member through the webhooks, and how a
down application gets its events once it is back: a real ``twistd`` broker
with ``--webhook`` pointed at an HTTP server in this process.

Usage: ``python -m benchmarks.webhook_latency [--repeat R] [--down SECONDS]``

**latency**: each run, a new STOMP connection (``--auth memory:``) subscribes
to a topic nobody else is on; the figure is the milliseconds from sending the
SUBSCRIBE to the application reading the POST that holds its
``member_added``.  **down**: the application answers 503 for ``--down``
seconds while a client subscribes; the figure is the seconds from the
application answering again to it having the event, which the back-off
(1, 2, 5, 10, 30, 60 s) bounds.

It prints a table, then one JSON line per figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.errors import BenchmarkError
from benchmarks.launcher import BrokerProcess, free_port
from benchmarks.report import print_results
from benchmarks.resume_cluster import Client

SECRET = b"webhook-latency-secret-0123456789"
TIMEOUT = 120.0


class Application(ThreadingHTTPServer):
    """Notes when each member's ``member_added`` arrives; answers 503 while down."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", free_port()), Handler)
        self.added: dict[str, float] = {}
        self.down = False
        self.refused = 0


class Handler(BaseHTTPRequestHandler):
    server: Application

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.server.down:
            self.server.refused += 1
            self.send_response(503)
        else:
            now = time.perf_counter()
            for event in json.loads(body)["events"]:
                if event["name"] == "member_added":
                    self.server.added.setdefault(event["member"]["id"], now)
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        """Quiet."""


def subscribe(port: int, login: str, topic: str) -> tuple[Client, float]:
    """:returns: a client of ``login`` and when its SUBSCRIBE was sent."""
    client = Client(port)
    client.send(f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{login}\npasscode:x\n\n\0".encode())
    client.read(1)
    sent = time.perf_counter()
    client.send(f"SUBSCRIBE\nid:s\ndestination:{topic}\n\n\0".encode())
    return client, sent


def arrival(app: Application, login: str) -> float:
    deadline = time.monotonic() + TIMEOUT
    while login not in app.added:
        if time.monotonic() > deadline:
            raise BenchmarkError(f"no member_added of {login} within {TIMEOUT:g} s")
        time.sleep(0.0005)
    return app.added[login]


def measure(repeat: int, down: float, workdir: Path) -> list[dict[str, Any]]:
    app = Application()
    thread = threading.Thread(target=app.serve_forever, daemon=True)
    thread.start()
    logins = [f"user{number}" for number in range(repeat + 1)]
    (workdir / "secret").write_bytes(SECRET)
    try:
        with BrokerProcess(
            workdir / "broker",
            "--webhook",
            f"http://127.0.0.1:{app.server_port}/hooks",
            "--webhook-secret-file",
            str(workdir / "secret"),
            "--auth",
            "memory:" + ":".join(f"{login}:x" for login in logins),
            "--data-dir",
            "none",
            reactor="uvloop",
        ) as broker:
            runs = []
            for number in range(repeat):
                login = logins[number]
                client, sent = subscribe(broker.port, login, f"/topic/hook.{number}")
                runs.append((arrival(app, login) - sent) * 1000)
                client.close()
            app.down = True
            login = logins[-1]
            client, _ = subscribe(broker.port, login, "/topic/hook.down")
            time.sleep(down)
            app.down = False
            back = time.perf_counter()
            late = arrival(app, login) - back
            client.close()
    finally:
        app.shutdown()
        app.server_close()
    common = {"benchmark": "webhook_latency", "python": sys.version.split()[0]}
    return [
        {
            **common,
            "figure": "member_added, SUBSCRIBE to the app",
            "value": round(statistics.median(runs), 2),
            "unit": "  ms (median)",
            "runs": " ".join(f"{run:.1f}" for run in runs),
        },
        {
            **common,
            "figure": f"after {down:g} s down ({app.refused} refused posts)",
            "value": round(late, 2),
            "unit": "  s to delivery once up",
            "runs": "",
        },
    ]


def main(argv: list[str]) -> int:
    """:returns: the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.webhook_latency")
    parser.add_argument("--repeat", type=int, default=20, help="runs (default 20)")
    parser.add_argument("--down", type=float, default=12.0, help="seconds down (default 12)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="webhook-latency-") as workdir:
        try:
            records = measure(args.repeat, args.down, Path(workdir))
        except BenchmarkError as error:
            print(f"webhook_latency: {error}", file=sys.stderr)
            return 1
    print_results(
        records,
        (
            ("figure", "figure", "<40"),
            ("value", "value", ">8"),
            ("  unit", "unit", "<26"),
            ("runs", "runs", "<40"),
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
