"""
The console's views in a real browser (Debian's Chromium, headless, driven by
Playwright) against a real broker: each view has a URL that can be shared and
reloaded, lists sort on a header's click with the order in the URL, policies
are listed, set and cleared (a bad one refused with the allowed values), the
overview charts the hour the broker kept before the page opened and shows
figures in one format, and every view is usable 800 pixels wide (screenshots
in the test's output directory).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.browser import chromium_page, require_chromium
from tests.support.clients import connect
from tests.support.management import cli, managed_broker
from tests.support.process import BrokerProcess

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

#: What Chromium logs for calls the console makes knowing they may be refused: who is signed
#: in before the sign-in (401); a bad policy, on purpose (400).
REFUSED_CALL = "Failed to load resource: the server responded with a status of 40"
VIEWS = ("overview", "connections", "destinations", "policies", "vhosts", "nodes", "detached")


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = managed_broker(
        tmp_path_factory.mktemp("console-views"),
        "--policy",
        "limited:pattern=limited.>,apply-to=queues,max-length=100",
        "--memory-high",
        "2G",
    )
    connection, _ = connect(process.address)
    for number, name in enumerate(("/queue/views.a", "/queue/views.b", "/queue/views.c")):
        for _ in range(number + 1):
            connection.send(name, "x" * 2048)
    connection.disconnect()
    yield process
    process.stop()


@pytest.fixture
def page() -> Iterator[Page]:
    """A fresh page in headless Chromium; JavaScript errors but REFUSED_CALL fail the test."""
    with chromium_page((REFUSED_CALL,)) as opened:
        yield opened


def console_url(broker: BrokerProcess, route: str = "") -> str:
    return f"http://127.0.0.1:{broker.http_port}/console{route}"


def sign_in(page: Page, broker: BrokerProcess, route: str = "") -> None:
    """Open the console at ``route`` and sign in as ``admin``."""
    page.goto(console_url(broker, route))
    page.fill("#user", "admin")
    page.fill("#password", "secret")
    page.click("#sign-in")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")


def test_each_view_has_a_url_that_can_be_shared_and_reloaded(
    console_broker: BrokerProcess, page: Page
) -> None:
    """
    A destination's own URL opens its page, after a reload too; a sorted list keeps its
    order in the URL; a connection's URL opens its page; the menu marks the view.
    """
    sign_in(page, console_broker, "#/destinations/%2F/%2Fqueue%2Fviews.b")
    expect(page.locator("#view-destination")).to_be_visible()
    expect(page.locator("#browsed")).to_have_text("/queue/views.b")
    expect(page.locator("#browse-count")).to_have_text("2 of 2")
    expect(page.locator('#views a[aria-current="page"]')).to_have_text("Destinations")
    page.reload()
    expect(page.locator("#browsed")).to_have_text("/queue/views.b")
    expect(page.locator("#messages li.message")).to_have_count(2)

    page.click('#views a[data-view="destinations"]')
    rows = page.locator("#destinations tbody tr")
    page.click('#destinations th[data-sort="depth"]')
    page.click('#destinations th[data-sort="depth"]')
    expect(page).to_have_url(re.compile(r"#/destinations\?sort=depth&sort_reverse=true$"))
    expect(rows.first).to_have_attribute("data-destination", "/queue/views.c")
    expect(page.locator('#destinations th[data-sort="depth"]')).to_have_attribute(
        "aria-sort", "descending"
    )
    page.reload()
    expect(rows.first).to_have_attribute("data-destination", "/queue/views.c")
    page.fill("#destinations-filter", "views.a")
    expect(rows).to_have_count(1)
    expect(page).to_have_url(re.compile(r"name=views.a"))
    expect(page.locator("#destinations-count")).to_contain_text("(1 of ")

    connection, _ = connect(console_broker.address)
    try:
        page.click('#views a[data-view="connections"]')
        link = page.locator('#connections tr[data-connection^="session-"] td.id a')
        expect(link).to_have_count(1)
        href = link.get_attribute("href")
        assert href is not None and href.startswith("#/connections/session-")
        page.goto(console_url(console_broker, href))
        page.reload()
        expect(page.locator("#view-connection")).to_be_visible()
        expect(page.locator('#connection-figures [data-figure="bytes in"] dd')).to_have_text(
            re.compile(r"^\d+ B$")
        )
    finally:
        connection.disconnect()


def test_policies_are_listed_set_and_cleared(console_broker: BrokerProcess, page: Page) -> None:
    """
    The policies page lists the one given at the start; a policy set from the form is
    in force on its destinations; a bad one is refused saying what is allowed; a policy
    cleared after confirmation is gone.
    """
    sign_in(page, console_broker, "#/policies")
    limited = page.locator('#policies tr[data-policy="limited"]')
    expect(limited.locator("td.pattern")).to_have_text("limited.>")
    expect(limited.locator("td.definition")).to_have_text("max-length = 100; overflow = drop-head")

    page.fill("#policy-name", "views")
    page.fill("#policy-pattern", "views.>")
    page.select_option("#policy-apply-to", "queues")
    page.fill("#policy-definition", "max-length = 5\noverflow = sideways")
    page.click("#policy-form button[type=submit]")
    expect(page.locator("#policy-notice")).to_contain_text("overflow")
    expect(page.locator("#policy-notice")).to_contain_text("reject-publish")
    expect(page.locator('#policies tr[data-policy="views"]')).to_have_count(0)

    page.fill("#policy-definition", "max-length = 5\noverflow = reject-publish")
    page.click("#policy-form button[type=submit]")
    expect(page.locator("#policy-notice")).to_have_text("set policy views on views.>")
    row = page.locator('#policies tr[data-policy="views"]')
    expect(row.locator("td.definition")).to_have_text("max-length = 5; overflow = reject-publish")
    listed = cli(console_broker, "policies")
    assert "views" in listed.stdout, listed.stderr
    page.goto(console_url(console_broker, "#/destinations/%2F/%2Fqueue%2Fviews.a"))
    expect(page.locator("#browsed-policy")).to_have_text("views")

    page.goto(console_url(console_broker, "#/policies"))
    row.get_by_role("button", name="Clear").click()
    page.click("#confirm-cancel")
    expect(row).to_have_count(1)
    row.get_by_role("button", name="Clear").click()
    expect(page.locator("#confirm-text")).to_contain_text("Clear policy views?")
    page.click("#confirm-ok")
    expect(page.locator("#policies-notice")).to_have_text("cleared views")
    expect(row).to_have_count(0)


def test_the_overview_charts_the_hour_the_broker_kept_and_formats_figures(
    console_broker: BrokerProcess, page: Page
) -> None:
    """
    Opened on a broker that has run a while, the charts have its points at once (the
    broker kept them); uptime reads as the dashboard's, bytes in KiB/MiB/GiB, and the
    configuration has no Python repr.
    """
    time.sleep(3.0)  # six live intervals of 0.5 s, kept by the broker before the page opens
    sign_in(page, console_broker)
    expect(page.locator("#figures dd").first).not_to_have_text("")
    for chart in ("chart-rates", "chart-connections", "chart-memory"):
        points = int(page.locator(f"#{chart}").get_attribute("data-points") or "0")
        assert points >= 6, (chart, points)
        expect(page.locator(f"#{chart} canvas")).to_have_count(1)
    uptime = page.locator('#figures [data-figure="uptime"] dd')
    expect(uptime).to_have_text(re.compile(r"^(\d+(\.\d)? s|\d+ min( \d+ s)?)$"))
    expect(page.locator('#figures [data-figure="memory (resident)"] dd')).to_have_text(
        re.compile(r"^\d+(\.\d)? MiB$")
    )
    configuration = page.locator("#configuration")
    expect(configuration.locator('tr[data-setting="memory-high"] td.value')).to_have_text("2 GiB")
    expect(configuration.locator('tr[data-setting="policies"] td.value')).to_have_text("limited")
    expect(configuration.locator('tr[data-setting="connect-timeout"] td.value')).to_have_text(
        "10 s"
    )
    assert "Policy(" not in configuration.inner_text()


def test_every_view_is_usable_800_pixels_wide(
    console_broker: BrokerProcess, page: Page, tmp_path: Path
) -> None:
    """
    At 800 px no view is wider than the window and no button is cut off: each view's
    screenshot goes to the test's output directory.
    """
    page.set_viewport_size({"width": 800, "height": 900})
    sign_in(page, console_broker)
    routes = [*VIEWS, "destinations/%2F/%2Fqueue%2Fviews.c"]
    for route in routes:
        page.goto(console_url(console_broker, f"#/{route}"))
        view = "destination" if route.startswith("destinations/") else route
        expect(page.locator(f"#view-{view}")).to_be_visible()
        expect(page.locator("#status")).to_have_attribute("data-state", "live")
        if view == "destinations":
            expect(page.locator("#destinations tbody tr").first).to_be_visible()
        page.screenshot(path=str(tmp_path / f"console-800-{view}.png"), full_page=True)
        overflow = page.evaluate(
            """() => {
                const width = document.documentElement.clientWidth;
                const cut = [...document.querySelectorAll("button, a, input, select")]
                    .filter((element) => element.offsetParent !== null)
                    .map((element) => [element.textContent || element.id,
                                       element.getBoundingClientRect()])
                    .filter(([, box]) => box.left < 0 || box.right > width)
                    .map(([name]) => name);
                return {scroll: document.documentElement.scrollWidth, width, cut};
            }"""
        )
        assert overflow["scroll"] <= overflow["width"], (route, overflow)
        assert overflow["cut"] == [], (route, overflow)
    assert len(list(tmp_path.glob("console-800-*.png"))) == len(routes)
