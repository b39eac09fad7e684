"""
The demo page in a real browser: Debian's Chromium, headless, driven by Playwright.

The page is loaded from the broker's web port and talks STOMP over ``ws://``
with the vendored ``@stomp/stompjs``; a ``stomp.py`` client on the TCP port is
on the other side of every message.  A screenshot of the page is kept in
``test-artifacts/browser-demo.png``.  Without Chromium the module is skipped, or
fails where it must run (:func:`tests.support.browser.require_chromium`).
"""

from __future__ import annotations

from typing import Any

from tests.support.browser import ARTIFACTS, require_chromium
from tests.support.clients import connect
from tests.support.process import BrokerProcess, module_broker

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

web_broker = module_broker("web_broker")


def received_rows(page: Page) -> Any:
    return page.locator("#messages tr.message")


def test_demo_page_talks_to_a_tcp_client_both_ways(web_broker: BrokerProcess, page: Page) -> None:
    """
    The demo page connects over ws://, receives what stomp.py sends over TCP, sends back, and binary
    bodies with NUL bytes survive both ways.
    """
    page.goto(f"http://127.0.0.1:{web_broker.http_port}/")
    expect(page.locator("#url")).to_have_value(f"ws://127.0.0.1:{web_broker.http_port}/ws")
    page.click("#connect")
    expect(page.locator("#status")).to_have_attribute("data-state", "connected")
    expect(page.locator("#status")).to_contain_text("STOMP 1.2")

    page.fill("#subscribe-destination", "/topic/browser")
    page.click("#subscribe")
    expect(page.locator('#subscriptions li[data-state="active"]')).to_have_count(1)

    connection, inbox = connect(web_broker.address)
    try:
        connection.send("/topic/browser", "hello from stomp.py over TCP")
        binary = b"bin\x00ary\xff\x00"
        connection.send(
            "/topic/browser", binary, headers={"content-type": "application/octet-stream"}
        )
        expect(received_rows(page)).to_have_count(2)
        newest, oldest = received_rows(page).all()
        expect(oldest.locator("td").nth(2)).to_have_text("hello from stomp.py over TCP")
        assert newest.get_attribute("data-hex") == binary.hex(" ")
        expect(newest.locator("td.binary")).to_contain_text("9 bytes")

        connection.subscribe("/topic/from-browser", id="tcp", receipt="subscribed")
        assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
        page.fill("#send-destination", "/topic/from-browser")
        page.fill("#body", "hello from Chromium")
        page.click("#send")
        assert inbox.wait_for(lambda: len(inbox.messages) == 1, timeout=10)
        page.select_option("#body-format", "hex")
        page.fill("#body", "00 ff 10 00 41")
        page.click("#send")
        assert inbox.wait_for(lambda: len(inbox.messages) == 2, timeout=10)
        assert inbox.bodies() == [b"hello from Chromium", b"\x00\xff\x10\x00\x41"]
        assert inbox.messages[1].headers["content-type"] == "application/octet-stream"
    finally:
        connection.disconnect()

    page.fill("#send-destination", "/topic/browser")
    page.fill("#body", "48 69 00 21")
    page.click("#send")
    expect(received_rows(page)).to_have_count(3)
    expect(page.locator("#log")).to_contain_text("sent 4 bytes to /topic/browser")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser-demo.png"), full_page=True)

    page.click("#disconnect")
    expect(page.locator("#status")).to_have_text("disconnected (WebSocket close code 1000)")
