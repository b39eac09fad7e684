"""
What the management API's calls behind the console cost with 10 000 connections
and 10 000 destinations, in one process, without sockets.

Usage: ``python -m benchmarks.console_lists [COUNT]``

A broker on a ``task.Clock`` gets ``COUNT`` (10 000) connections and as many
queues of one message, and its live statistics two samples; then each call the
console makes on a view is timed through the API resource (``StubTreq``), as
the median of five: the overview without its lists (``brief``), the virtual
hosts, the first page of destinations and of connections, sorted or not, and
the full overview and the whole lists (no ``page``), which the console fetched
on every refresh before it paged, for comparison.  It prints one JSON
line per call, in milliseconds.  It takes a minute or so.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from tests.support.api import Api
from tests.support.broker import FakeConnection

CALLS = (
    "overview?brief=true",
    "vhosts",
    "destinations?page=1",
    "destinations?page=37&sort=depth&sort_reverse=true",
    "connections?page=1",
    "connections?page=1&sort=messages_in",
    "overview",
    "destinations",
    "connections",
)
REPEATS = 5


def main(count: int = 10_000) -> None:
    api = Api(live_interval=5.0)
    for number in range(count):
        api.broker.publish(f"/queue/many.{number:05}", "m")
        api.broker.open_connection(FakeConnection(f"c{number}"))
    assert api.live is not None
    api.live.tick()
    api.clock.advance(5.0)
    api.live.tick()
    for path in CALLS:
        times = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            code, _, _ = api.call("GET", path)
            times.append(time.perf_counter() - started)
            assert code == 200, path
        median = round(statistics.median(times) * 1000, 1)
        print(json.dumps({"call": path, "count": count, "median_ms": median}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
