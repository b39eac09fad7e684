"""
The demo page resumes its session through ``resumable.js`` in a real browser
(Debian's Chromium, headless, driven by Playwright): its WebSocket is cut from
the page (no DISCONNECT), messages are published from Python meanwhile, and
the page reconnects and shows every one of them, none twice.
"""

from __future__ import annotations

import time

from tests.support.browser import ARTIFACTS, require_chromium
from tests.support.clients import publish
from tests.support.process import BrokerProcess, module_broker

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

resume_web_broker = module_broker("resume_web_broker")

#: How long the page stays away once cut, in milliseconds: time enough to publish.
AWAY_MS = 3000


def shown(page: Page) -> list[str]:
    """:returns: the bodies the page shows, oldest first."""
    cells = page.locator("#messages tr.message td:nth-child(3)").all_text_contents()
    return list(reversed(cells))


def test_the_page_resumes_after_a_cut_and_shows_every_message_once(
    resume_web_broker: BrokerProcess, page: Page
) -> None:
    """What was published while the page's WebSocket was down arrives after it reconnects, once."""
    page.goto(f"http://127.0.0.1:{resume_web_broker.http_port}/")
    page.click("#connect")
    expect(page.locator("#status")).to_have_attribute("data-state", "connected")
    expect(page.locator("#status")).to_have_attribute("data-resumed", "false")
    page.fill("#subscribe-destination", "/topic/browser-resume")
    page.click("#subscribe")
    expect(page.locator('#subscriptions li[data-state="active"]')).to_have_count(1)

    address = resume_web_broker.address
    publish(address, "/topic/browser-resume", ["before 1", "before 2"])
    expect(page.locator("#messages tr.message")).to_have_count(2)

    page.evaluate(f"window.stompDemo.client.reconnectDelay = {AWAY_MS}")
    page.click("#drop")
    expect(page.locator("#status")).to_have_attribute("data-state", "reconnecting")
    # The broker has seen the WebSocket close by the time the page has; a moment more.
    time.sleep(0.3)
    publish(address, "/topic/browser-resume", [f"away {n}" for n in range(1, 6)])

    expect(page.locator("#status")).to_have_attribute("data-state", "connected", timeout=15_000)
    expect(page.locator("#status")).to_have_attribute("data-resumed", "true")
    expect(page.locator("#status")).to_contain_text("resumed")
    expect(page.locator('#subscriptions li[data-state="active"]')).to_have_count(1)
    publish(address, "/topic/browser-resume", ["after 1"])
    expect(page.locator("#messages tr.message")).to_have_count(8)
    page.wait_for_timeout(300)
    assert shown(page) == [
        "before 1",
        "before 2",
        *(f"away {n}" for n in range(1, 6)),
        "after 1",
    ]
    expect(page.locator("#log")).to_contain_text("session resumed")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser-resume.png"), full_page=True)
