"""
The management API's publish rate: one message per call against batches
(``POST /api/publish``), on a real ``twistd`` broker.

Usage: ``python -m benchmarks.api_publish [--messages N] [--batches 1,100,1000]``

Each figure: ``--messages`` messages of 117 bytes to one queue, no consumer,
posted one call after another over one keep-alive HTTP connection
(``http.client``), each call's answer read before the next; the queue's depth
is checked at the end.  A batch size of 1 uses the one-message call
(``POST /api/destinations/{name}/publish``).  The broker runs without
``--auth`` (the API answers loopback callers), with ``--data-dir none``.

It prints a table, then one JSON line per figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.errors import BenchmarkError
from benchmarks.launcher import BrokerProcess
from benchmarks.report import print_results

BODY = "x" * 117


def post(connection: http.client.HTTPConnection, path: str, document: Any) -> Any:
    """:returns: the JSON answer of one POST, which must be a 200."""
    connection.request(
        "POST", path, json.dumps(document), headers={"Content-Type": "application/json"}
    )
    answer = connection.getresponse()
    content = answer.read()
    if answer.status != 200:
        raise BenchmarkError(f"POST {path}: {answer.status} {content[:200]!r}")
    return json.loads(content)


def depth(connection: http.client.HTTPConnection, queue: str) -> int:
    connection.request("GET", f"/api/destinations/{queue.replace('/', '%2F')}")
    answer = connection.getresponse()
    document = json.loads(answer.read())
    return int(document["depth"])


def one_figure(port: int, messages: int, batch: int) -> float:
    """:returns: messages per second published in calls of ``batch`` messages."""
    queue = f"/queue/api-publish-{batch}"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    if batch == 1:
        path = f"/api/destinations/{queue.replace('/', '%2F')}/publish"
        for _ in range(messages):
            post(connection, path, {"body": BODY})
    else:
        one = {"destination": queue, "body": BODY}
        for sent in range(0, messages, batch):
            post(connection, "/api/publish", {"messages": [one] * min(batch, messages - sent)})
    elapsed = time.perf_counter() - started
    if depth(connection, queue) != messages:
        raise BenchmarkError(f"{queue} holds not the {messages} messages published")
    connection.close()
    return messages / elapsed


def main(argv: list[str]) -> int:
    """:returns: the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.api_publish")
    parser.add_argument("--messages", type=int, default=20000, help="per figure (default 20000)")
    parser.add_argument("--batches", default="1,100,1000", help="batch sizes (default 1,100,1000)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.batches.split(",")]
    records = []
    with tempfile.TemporaryDirectory(prefix="api-publish-") as workdir:
        with BrokerProcess(Path(workdir), "--data-dir", "none", reactor="uvloop") as broker:
            for size in sizes:
                try:
                    rate = one_figure(broker.http_port, args.messages, size)
                except BenchmarkError as error:
                    print(f"api_publish: {error}", file=sys.stderr)
                    return 1
                records.append(
                    {
                        "benchmark": "api_publish",
                        "figure": f"batches of {size}",
                        "value": round(rate),
                        "unit": "  msgs/s",
                        "messages": args.messages,
                        "python": sys.version.split()[0],
                    }
                )
    print_results(
        records,
        (("figure", "figure", "<20"), ("value", "value", ">10"), ("  unit", "unit", "<10")),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
