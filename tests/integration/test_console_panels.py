"""
The console's panels in a real browser (Debian's Chromium, headless, driven by
Playwright) against a real broker: a destination's panel after a purge, its
"shown of waiting" count, its chart of rates and depth; a connection's panel
with its subscriptions; the memory alarm, the listeners and the configuration
in the overview, with ``/metrics`` agreeing; the policy in force on each destination,
in the table and in its panel; with virtual hosts, a vhost column and actions
on a row that act in its virtual host only.  A screenshot is kept in
``test-artifacts/console-panels.png``.
"""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stomp

from tests.support.browser import ARTIFACTS, chromium_page, require_chromium
from tests.support.clients import Collector, connect
from tests.support.management import cli, managed_broker
from tests.support.process import BrokerProcess
from tests.support.web import metric_samples

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

#: The chart's data-points once it has three points or more.
THREE_OR_MORE = re.compile(r"^([3-9]|[1-9][0-9]+)$")


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("console-panels")
    process = managed_broker(
        workdir,
        "--max-connections",
        "500",
        "--policy",
        "limited:pattern=limited.>,apply-to=queues,max-length=100",
    )
    yield process
    process.stop()


@pytest.fixture
def alarm_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker over its memory high mark from the start: 1 MiB is under what Python uses."""
    process = managed_broker(tmp_path, "--memory-high", "1M", "--max-connections", "500")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def hosts_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker serving the virtual host ``shop`` beside the default one."""
    process = managed_broker(tmp_path_factory.mktemp("console-vhosts"), "--vhost", "shop")
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


def show(page: Page, view: str) -> None:
    """Open one of the console's views from its menu."""
    page.click(f'#views a[data-view="{view}"]')
    expect(page.locator(f"#view-{view}")).to_be_visible()


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
    show(page, "destinations")
    row = page.locator('#destinations tr[data-destination="/queue/panel"]')
    expect(row.locator("td.depth")).to_have_text("25")
    # Without virtual hosts, no vhost column (docs/virtual-hosts.md).
    expect(page.locator("#destinations th.vhost")).to_be_hidden()
    expect(row.locator("td.vhost")).to_be_hidden()
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
    show(page, "destinations")
    expect(row.locator("td.depth")).to_have_text("0")
    expect(page.locator("#destinations-notice")).to_have_text("")


def test_the_console_shows_the_policy_in_force_on_each_destination(
    console_broker: BrokerProcess, page: Page
) -> None:
    """
    The destinations table has the policy of each destination ("none" without one), and
    so has a destination's panel; a policy set at run time shows at the next refresh.
    """
    connection, _ = connect(console_broker.address)
    try:
        connection.send("/queue/limited.orders", "one")
        connection.send("/queue/unlimited", "two")
    finally:
        connection.disconnect()
    sign_in(page, console_broker)
    show(page, "destinations")
    limited = page.locator('#destinations tr[data-destination="/queue/limited.orders"]')
    unlimited = page.locator('#destinations tr[data-destination="/queue/unlimited"]')
    expect(limited.locator("td.policy")).to_have_text("limited")
    expect(unlimited.locator("td.policy")).to_have_text("none")
    limited.locator("td a.name").click()
    expect(page.locator("#browsed")).to_have_text("/queue/limited.orders")
    expect(page.locator("#browsed-policy")).to_have_text("limited")

    answer = cli(console_broker, "set-policy", "everything", "unlimited", "--max-length", "5")
    assert answer.returncode == 0, answer.stderr
    try:
        show(page, "destinations")
        expect(unlimited.locator("td.policy")).to_have_text("everything")
        unlimited.locator("td a.name").click()
        expect(page.locator("#browsed")).to_have_text("/queue/unlimited")
        expect(page.locator("#browsed-policy")).to_have_text("everything")
    finally:
        assert cli(console_broker, "clear-policy", "everything").returncode == 0


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
        show(page, "connections")
        client_row = page.locator('#connections tr:has(td.subscriptions:text-is("2"))')
        expect(client_row).to_have_count(1)
        client_row.locator("td.id a").click()
        panel = page.locator("#view-connection")
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
    listeners = page.locator("#listeners tbody")
    expect(listeners).to_contain_text(f"stomp://127.0.0.1:{console_broker.port}")
    expect(listeners).to_contain_text(f":{console_broker.http_port}/")
    setting = page.locator('#configuration tr:has(td:text-is("max-connections")) td').nth(1)
    expect(setting).to_have_text("500")
    # The memory marks in force are the alarm's, in the units used everywhere.
    memory_low = page.locator('#configuration tr[data-setting="memory-low"] td.value')
    expect(memory_low).to_have_text(re.compile(r"^\d+(\.\d)? (KiB|MiB)$"))
    url = f"http://127.0.0.1:{console_broker.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        samples = metric_samples(response.read())
    assert samples["stompbroker_memory_alarm", ()] == 1
    assert samples["stompbroker_memory_high_watermark_bytes", ()] == 1024 * 1024


def open_in_shop(address: tuple[str, int]) -> tuple[Any, Collector]:
    """An anonymous ``stomp.py`` connection whose CONNECT says ``host:shop``."""
    connection = stomp.Connection12([address], vhost="shop", auto_decode=False)
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect(wait=True)
    return connection, collector


def send_all(connection: Any, events: Collector, destination: str, count: int) -> None:
    """Send ``count`` messages, the last with a receipt: all are queued once it comes."""
    receipt = uuid.uuid4().hex
    for number in range(count):
        headers = {"receipt": receipt} if number == count - 1 else {}
        connection.send(destination, f"message {number}", headers=headers)
    assert events.wait_for(lambda: receipt in events.receipts), events.errors


def test_actions_on_a_row_act_in_its_virtual_host(hosts_broker: BrokerProcess, page: Page) -> None:
    """
    ``/queue/same`` in the default host and in ``shop``: no vhost column while only the
    default host has rows; then two rows, each with its host; browsing and purging
    the shop's leaves the default host's queue as it was, and publishing with the
    form's virtual host reaches the shop's queue only.
    """
    queue = f"/queue/same.{uuid.uuid4().hex[:8]}"
    default, default_events = connect(hosts_broker.address)
    shop, shop_events = open_in_shop(hosts_broker.address)
    try:
        send_all(default, default_events, queue, 3)
        sign_in(page, hosts_broker)
        show(page, "connections")
        # The shop's connection is open: the connections table shows it in its host.
        expect(page.locator('#connections tr[data-vhost="shop"] td.vhost')).to_have_text("shop")
        show(page, "destinations")
        home_row = page.locator(f'#destinations tr[data-vhost="/"][data-destination="{queue}"]')
        expect(home_row.locator("td.depth")).to_have_text("3")
        expect(page.locator("#destinations th.vhost")).to_be_visible()

        send_all(shop, shop_events, queue, 2)
        shop_row = page.locator(f'#destinations tr[data-vhost="shop"][data-destination="{queue}"]')
        expect(shop_row.locator("td.depth")).to_have_text("2")
        expect(shop_row.locator("td.vhost")).to_have_text("shop")
        expect(home_row.locator("td.vhost")).to_have_text("/")

        shop_row.get_by_role("button", name="Browse").click()
        expect(page.locator("#browsed")).to_have_text(queue)
        expect(page.locator("#browsed-vhost")).to_have_text("shop")
        expect(page.locator("#messages li.message")).to_have_count(2)
        expect(page.locator("#browse-count")).to_have_text("2 of 2")

        page.go_back()
        shop_row.get_by_role("button", name="Purge").click()
        expect(page.locator("#confirm-text")).to_contain_text(f"{queue} (vhost shop)")
        page.click("#confirm-ok")
        expect(page.locator("#destinations-notice")).to_have_text(
            f"purged 2 messages from {queue} (vhost shop)"
        )
        expect(shop_row.locator("td.depth")).to_have_text("0")
        page.go_forward()
        expect(page.locator("#messages li.message")).to_have_count(0)
        page.go_back()
        expect(home_row.locator("td.depth")).to_have_text("3")

        page.fill("#publish-vhost", "shop")
        page.fill("#publish-destination", queue)
        page.fill("#publish-body", "from the console")
        page.click("#publish button[type=submit]")
        expect(page.locator("#publish-notice")).to_contain_text(f"to {queue} (vhost shop)")
        expect(shop_row.locator("td.depth")).to_have_text("1")
        expect(home_row.locator("td.depth")).to_have_text("3")
    finally:
        default.disconnect()
        shop.disconnect()
