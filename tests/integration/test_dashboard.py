"""
The live dashboard in a real browser: Debian's Chromium, headless, driven by
Playwright (the ``page`` fixture and the skip rules of :mod:`tests.support.browser`).

The page is loaded from the broker's web port, subscribes to
``/topic/stompbroker.stats`` over ``ws://`` with the vendored ``@stomp/stompjs``,
and draws uPlot charts while ``stomp.py`` clients make traffic on the TCP port.
A screenshot is kept in ``test-artifacts/dashboard.png``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest

from tests.support.browser import ARTIFACTS, require_chromium
from tests.support.clients import connect
from tests.support.process import BrokerProcess, module_broker

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

#: Seconds between two snapshots: short, so that the charts fill within the test.
MONITOR_INTERVAL = 0.5
#: Snapshots to wait for before looking at the charts.
POINTS = 5
#: The body's data-points once POINTS snapshots or more have been drawn.
AT_LEAST_POINTS = re.compile(rf"^([{POINTS}-9]|[1-9][0-9]+)$")
DESTINATIONS = ("/topic/prices.eur", "/topic/prices.usd", "/queue/orders")


stats_broker = module_broker(
    "stats_broker", "--data-dir", "none", "--monitor-interval", str(MONITOR_INTERVAL)
)


@pytest.fixture
def traffic(stats_broker: BrokerProcess) -> Iterator[None]:
    """
    Steady traffic while the test runs: two topics with a subscriber, and a queue
    whose consumer never acknowledges, so that its depth grows.
    """
    watcher, seen = connect(stats_broker.address)
    watcher.subscribe("/topic/prices.*", id="prices", receipt="watching")
    assert seen.wait_for(lambda: "watching" in seen.receipts)
    watcher.subscribe("/queue/orders", id="orders", ack="client", headers={"prefetch-count": "3"})
    producer, _ = connect(stats_broker.address)
    stop = threading.Event()

    def publish() -> None:
        sent = 0
        while not stop.wait(0.02):
            sent += 1
            producer.send("/topic/prices.eur", b"e" * 40)
            if sent % 2:
                producer.send("/topic/prices.usd", b"u" * 60)
            if sent % 3 == 0:
                producer.send("/queue/orders", b"order")

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(5)
    producer.disconnect()
    watcher.disconnect()


def test_dashboard_draws_live_charts_of_the_traffic(
    stats_broker: BrokerProcess,
    traffic: None,
    page: Page,
) -> None:
    """
    /dashboard connects over ws://, follows the stats topic, and draws throughput, depth and
    connection charts and a table of the destinations with traffic.
    """
    page.goto(f"http://127.0.0.1:{stats_broker.http_port}/dashboard")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    # An expect, not wait_for_function: the page's Content-Security-Policy forbids eval.
    expect(page.locator("body")).to_have_attribute("data-points", AT_LEAST_POINTS)
    for chart in ("#throughput", "#depth", "#connections-chart"):
        expect(page.locator(f"{chart} canvas")).to_have_count(1)
    legend = page.locator("#throughput .u-legend")
    for destination in DESTINATIONS:
        expect(legend).to_contain_text(destination)
        expect(page.locator(f'#destinations tr[data-destination="{destination}"]')).to_have_count(1)
    expect(page.locator("#depth .u-legend")).to_contain_text("/queue/orders")
    # The two stomp.py clients, and the page's own WebSocket once the broker counts it.
    assert int(page.locator("#connections").inner_text()) >= 2
    depth = page.locator('#destinations tr[data-destination="/queue/orders"] td').nth(3)
    assert int(depth.inner_text().replace(",", "")) > 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
