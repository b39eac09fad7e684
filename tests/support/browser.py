"""
The ``page`` fixture: a page in Debian's Chromium, headless, driven by Playwright,
for the tests of the web pages the broker serves.

``.ci/run`` installs ``chromium`` with apt-get and sets ``STOMPBROKER_REQUIRE_BROWSER``,
so there a missing browser fails the tests; elsewhere they are skipped, saying why.
Playwright never downloads a browser here (no ``playwright install``), and is
imported only once a browser is known to be there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.process import ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Where the tests keep their screenshots.
ARTIFACTS = ROOT / "test-artifacts"
#: Bounded waits in the page, in milliseconds.
PAGE_TIMEOUT_MS = 10_000


def require_chromium() -> None:
    """
    Skip the calling test module when Chromium is missing, or fail it where
    ``STOMPBROKER_REQUIRE_BROWSER`` says that it must be there.

    :raises RuntimeError: when Chromium is missing but required.
    """
    if CHROMIUM.exists():
        return
    reason = (
        f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium), as .ci/run"
        " does; see issue 4 (STOMP over WebSocket, browser tests)"
    )
    if os.environ.get("STOMPBROKER_REQUIRE_BROWSER"):
        raise RuntimeError(reason)
    pytest.skip(reason, allow_module_level=True)


@pytest.fixture
def page() -> Iterator[Page]:
    """A fresh page in headless Chromium; JavaScript errors on it fail the test."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on(
                "console",
                lambda message: errors.append(message.text) if message.type == "error" else None,
            )
            yield page
        finally:
            browser.close()
    assert errors == []
