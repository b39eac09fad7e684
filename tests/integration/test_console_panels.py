"""
The console's panels in a real browser (Debian's Chromium, headless, driven by
Playwright) against a real broker: a destination's panel after a purge, its
"shown of waiting" count, its chart of rates and depth; a connection's panel
with its subscriptions; the memory alarm, the listeners and the configuration
in the overview, with ``/metrics`` agreeing.  A screenshot is kept in
``test-artifacts/console-panels.png``.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.browser import ARTIFACTS, chromium_page, require_chromium
from tests.support.clients import connect
from tests.support.management import managed_broker
from tests.support.process import BrokerProcess
from tests.support.web import metric_samples

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

#: The chart's data-points once it has three points or more.
THREE_OR_MORE = re.compile(r"^([3-9]|[1-9][0-9]+)$")


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("console-panels")
    process = managed_broker(workdir, "--max-connections", "500")
    yield process
    process.stop()


@pytest.fixture
def alarm_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker over its memory high mark from the start: 1 MiB is under what Python uses."""
    process = managed_broker(tmp_path, "--memory-high", "1M", "--max-connections", "500")
    yield process
    process.stop()


#: What Chromium logs for the calls the console makes knowing they may be refused: who is
#: signed in before the sign-in (401), a connection's panel once it is closed (404).
REFUSED_CALL = "Failed to load resource: the server responded with a status of 40"


@pytest.fixture
def page() -> Iterator[Page]:
    """A fresh page in headless Chromium; JavaScript errors but REFUSED_CALL fail the test."""
    with chromium_page((REFUSED_CALL,)) as opened:
        yield opened


def sign_in(page: Page, broker: BrokerProcess) -> None:
    """Open the console and sign in as ``admin`` through the shared sign-in."""
    page.goto(f"http://127.0.0.1:{broker.http_port}/console")
    expect(page.locator("#sign-in-dialog")).to_be_visible()
    page.fill("#user", "admin")
    page.fill("#password", "secret")
    page.click("#sign-in")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")


def test_the_destination_panel_counts_what_it_shows_and_empties_after_a_purge(
    console_broker: BrokerProcess, page: Page
) -> None:
    """
    Browsing a queue of 25 shows "20 of 25"; a purge from the panel says so in the panel,
    and the panel lists nothing more; its chart has drawn the depth meanwhile.
    """
    connection, _ = connect(console_broker.address)
    try:
        for number in range(25):
            connection.send("/queue/panel", f"message {number}")
    finally:
        connection.disconnect()
    sign_in(page, console_broker)
    row = page.locator('#destinations tr[data-destination="/queue/panel"]')
    expect(row.locator("td.depth")).to_have_text("25")
    row.get_by_role("button", name="Browse").click()
    expect(page.locator("#browsed")).to_have_text("/queue/panel")
    expect(page.locator("#messages li.message")).to_have_count(20)
    expect(page.locator("#browse-count")).to_have_text("20 of 25")
    chart = page.locator("#destination-chart")
    expect(chart).to_have_attribute("data-points", THREE_OR_MORE)
    expect(chart.locator("canvas")).to_have_count(1)
    for series in ("in/s", "out/s", "depth"):
        expect(chart.locator(".u-legend")).to_contain_text(series)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "console-panels.png"), full_page=True)

    page.locator("#browser-actions").get_by_role("button", name="Purge").click()
    expect(page.locator("#confirm-text")).to_contain_text("Purge every message waiting in")
    page.click("#confirm-ok")
    expect(page.locator("#browser-notice")).to_have_text("purged 25 messages from /queue/panel")
    expect(page.locator("#messages li.message")).to_have_count(0)
    expect(page.locator("#browse-count")).to_have_text("none")
    expect(row.locator("td.depth")).to_have_text("0")
    expect(page.locator("#destinations-notice")).to_have_text("")


def test_a_connections_panel_lists_its_subscriptions(
    console_broker: BrokerProcess, page: Page
) -> None:
    """Clicking a connection's id opens its panel: its login, peer and every subscription."""
    connection, inbox = connect(console_broker.address, login="admin", passcode="secret")
    try:
        connection.subscribe("/queue/work", id="worker", ack="client-individual")
        connection.subscribe("/topic/news.#", id="news", receipt="subscribed")
        assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
        sign_in(page, console_broker)
        client_row = page.locator('#connections tr:has(td.subscriptions:text-is("2"))')
        expect(client_row).to_have_count(1)
        client_row.locator("td.id button").click()
        panel = page.locator("#connection")
        expect(panel).to_be_visible()
        expect(page.locator('#connection-figures [data-figure="login"] dd')).to_have_text("admin")
        rows = page.locator("#connection-subscriptions tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text("/queue/work")
        expect(rows.nth(0)).to_contain_text("client-individual")
        expect(rows.nth(1)).to_contain_text("/topic/news.#")
        page.click("#close-connection")
        page.click("#confirm-ok")
        expect(page.locator("#connection-notice")).to_contain_text("closed session-")
        expect(page.locator('#connection-figures [data-figure="state"] dd')).to_have_text("closed")
        assert inbox.wait_for(lambda: inbox.errors, 10.0)
    finally:
        if connection.is_connected():
            connection.disconnect()


def test_the_overview_shows_the_memory_alarm_listeners_and_configuration(
    alarm_broker: BrokerProcess, page: Page
) -> None:
    """
    Over --memory-high, the console says publishers are paused, as /metrics does; the
    listeners show with their URLs and the configuration with the options given.
    """
    console_broker = alarm_broker
    sign_in(page, console_broker)
    expect(page.locator("#memory-alarm")).to_be_visible()
    expect(page.locator("#memory-alarm")).to_contain_text("publishers are paused")
    page.click("#setup summary")
    listeners = page.locator("#listeners tbody")
    expect(listeners).to_contain_text(f"stomp://127.0.0.1:{console_broker.port}")
    expect(listeners).to_contain_text(f":{console_broker.http_port}/")
    setting = page.locator('#configuration tr:has(td:text-is("max-connections")) td').nth(1)
    expect(setting).to_have_text("500")
    url = f"http://127.0.0.1:{console_broker.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        samples = metric_samples(response.read())
    assert samples["stompbroker_memory_alarm", ()] == 1
    assert samples["stompbroker_memory_high_watermark_bytes", ()] == 1024 * 1024
