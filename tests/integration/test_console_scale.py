"""
The console with 10 000 destinations and 10 000 connections, in a real browser
(Debian's Chromium, headless, driven by Playwright): the lists are sorted,
filtered and paged by the broker, so a page holds one page of rows, and every
page, sort and filter shows the right rows.  How long each takes to show is
measured (from the URL's change to the rows on screen) and written to the test's
output directory, ``timings.json``, and printed: figures for benchmarks/JOURNAL.md,
not asserted.
"""

from __future__ import annotations

import base64
import json
import resource
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import chromium_page, require_chromium
from tests.support.clients import connect
from tests.support.management import ADMIN, managed_broker
from tests.support.process import BrokerProcess

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

COUNT = 10_000
#: Connections opened at once.
BATCH = 40
#: What Chromium logs for the call that asks who is signed in before the sign-in (401).
REFUSED_CALL = "Failed to load resource: the server responded with a status of 40"
#: Go to a route, then wait until the rows of its table are the ones expected: the milliseconds.
TIMED_ROUTE = """async ([route, table, attribute, first]) => {
    const started = performance.now();
    location.hash = route;
    const shown = () => {
        const row = document.querySelector(`#${table} tbody tr`);
        return row !== null && row.dataset[attribute] === first
            && !document.getElementById(`view-${table}`).hidden;
    };
    while (!shown()) await new Promise((resolve) => setTimeout(resolve, 2));
    return performance.now() - started;
}"""


def api_get(broker: BrokerProcess, path: str) -> Any:
    """:returns: the JSON answer of ``GET /api/{path}``, called as ``admin``."""
    request = urllib.request.Request(f"http://127.0.0.1:{broker.http_port}/api/{path}")
    token = base64.b64encode(":".join(ADMIN).encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def ensure_descriptors(needed: int) -> None:
    """
    Raise this process's open-file limit (which the broker inherits) to ``needed``,
    or skip the module where the hard limit is lower, saying so.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"10 000 connections need {needed} open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


@pytest.fixture(scope="module")
def crowded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of 10 000 queues of one message (the last has two) and 10 000 clients."""
    ensure_descriptors(COUNT + 1000)
    process = managed_broker(
        tmp_path_factory.mktemp("console-scale"),
        "--max-connections",
        str(COUNT + 100),
        "--data-dir",
        "none",
    )
    sender, inbox = connect(process.address)
    for number in range(COUNT):
        sender.send(f"/queue/many.{number:05}", "m" * (1 + number % 7))
    sender.send("/queue/many.09999", "last", headers={"receipt": "all-sent"})
    assert inbox.wait_for(lambda: "all-sent" in inbox.receipts, 60.0)
    sender.disconnect()
    clients: list[socket.socket] = []
    try:
        # In batches under the listen backlog (50): more connecting at once would have
        # their SYNs dropped and sent again a second later.
        for _ in range(0, COUNT, BATCH):
            batch = [socket.create_connection(process.address) for _ in range(BATCH)]
            clients.extend(batch)
            for client in batch:
                client.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00")
            for client in batch:
                assert client.recv(4096).startswith(b"CONNECTED")
        yield process
    finally:
        for client in clients:
            client.close()
        process.stop()


@pytest.fixture
def page() -> Iterator[Page]:
    with chromium_page((REFUSED_CALL,)) as opened:
        yield opened


def test_ten_thousand_destinations_and_connections_page_sort_and_filter(
    crowded_broker: BrokerProcess, page: Page, tmp_path: Path
) -> None:
    """
    Each list says 10 000 and holds one page; a far page, a reversed sort, a sort on a
    count and a filter each show the right first row; their times go to timings.json.
    """
    totals = api_get(crowded_broker, "overview?brief=true")["object_totals"]
    assert totals["connections"] >= COUNT and totals["destinations"] >= COUNT
    page.goto(f"http://127.0.0.1:{crowded_broker.http_port}/console#/destinations")
    page.fill("#user", "admin")
    page.fill("#password", "secret")
    page.click("#sign-in")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("#destinations-count")).to_have_text("10,000 destinations")
    expect(page.locator("#destinations tbody tr")).to_have_count(100)

    cases = [
        ("#/destinations?page=37", "destinations", "destination", "/queue/many.03600"),
        (
            "#/destinations?sort=destination&sort_reverse=true",
            "destinations",
            "destination",
            "/queue/many.09999",
        ),
        # Every queue holds one message but the last, which sorts last.
        (
            "#/destinations?sort=depth&page_size=500",
            "destinations",
            "destination",
            "/queue/many.00000",
        ),
        ("#/destinations?name=many.0424", "destinations", "destination", "/queue/many.04240"),
        ("#/connections", "connections", "connection", None),
        ("#/connections?page=100&sort=id", "connections", "connection", None),
    ]
    timings = {}
    for route, table, attribute, first in cases:
        if first is None:
            # A connection's id is the broker's: the first row is the one the API gives.
            query = route.partition("?")[2] or "page=1"
            first = api_get(crowded_broker, f"connections?{query}")["items"][0]["id"]
        timings[route] = round(page.evaluate(TIMED_ROUTE, [route, table, attribute, first]), 1)
        query = route.partition("?")[2] or "page=1"
        started = time.perf_counter()
        api_get(crowded_broker, f"{table}?{query}")
        timings[f"API {table}?{query}"] = round((time.perf_counter() - started) * 1000, 1)
        count = page.locator(f"#{table}-count")
        expect(count).to_contain_text("10,0")
    expect(page.locator("#connections tbody tr")).to_have_count(100)
    expect(page.locator("#connections-pager .where")).to_have_text("page 100 of 100")
    (tmp_path / "timings.json").write_text(json.dumps(timings, indent=1))
    print("console render times, ms:", json.dumps(timings))
