"""
One sign-in for the three pages, in a real browser (Debian's Chromium, headless,
driven by Playwright) against a real broker with ``--auth`` and no anonymous
access: the dashboard, the demo and the console each ask for it when the broker
refuses them, share it through the tab's sessionStorage as one navigates between
them, and use it for the API and for their STOMP-over-WebSocket connections.
Credentials never show in a URL or in the broker's log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support import tokens
from tests.support.browser import chromium_page, require_chromium
from tests.support.process import BrokerProcess

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

#: What Chromium logs for the refused calls the tests make on purpose (a wrong password).
REFUSED_CALL = "Failed to load resource: the server responded with a status of 401"
#: Everyone who signs in may do everything; nobody gets in anonymously.
ACCESS = """
[users.admin]
read = ["#"]
write = ["#"]
admin = ["#"]
"""
PASSWORD = "s3cret-word"


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("sign-in")
    access = workdir / "access.toml"
    access.write_text(ACCESS)
    process = BrokerProcess(
        workdir,
        "--auth",
        f"memory:admin:{PASSWORD}",
        "--auth",
        tokens.hs256_auth(workdir),
        "--access",
        str(access),
        "--monitor-interval",
        "0.5",
    )
    yield process
    process.stop()


@pytest.fixture
def page() -> Iterator[Page]:
    """A fresh page in headless Chromium; JavaScript errors but REFUSED_CALL fail the test."""
    with chromium_page((REFUSED_CALL,)) as opened:
        yield opened


def sign_in_dialog(page: Page) -> None:
    """Wait for the shared sign-in dialog to be open."""
    expect(page.locator("#sign-in-dialog")).to_be_visible()


def test_one_password_signs_in_the_dashboard_the_console_and_the_demo(
    auth_broker: BrokerProcess, page: Page
) -> None:
    """
    The dashboard's refused anonymous login opens the sign-in; a wrong password is refused
    there, the right one makes the dashboard live; the console and the demo, reached by the
    header's links, are signed in already; signing out forgets it for every page.
    """
    base = f"http://127.0.0.1:{auth_broker.http_port}"
    page.goto(f"{base}/dashboard")
    sign_in_dialog(page)
    expect(page.locator("#login-error")).to_contain_text("login failed")
    expect(page.locator("#status")).to_have_attribute("data-state", "signed-out")
    page.fill("#user", "admin")
    page.fill("#password", "wrong")
    page.click("#sign-in")
    expect(page.locator("#login-error")).to_contain_text(
        "login failed: the user name or password was not accepted"
    )
    page.fill("#password", PASSWORD)
    page.click("#sign-in")
    expect(page.locator("#sign-in-dialog")).to_be_hidden()
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("body")).not_to_have_attribute("data-points", "0")
    expect(page.locator("#who")).to_have_text("signed in as admin")

    page.click("#pages a:text-is('console')")
    expect(page).to_have_url(f"{base}/console")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("#sign-in-dialog")).to_be_hidden()
    expect(page.locator("#console")).to_be_visible()

    page.click("#pages a:text-is('demo')")
    expect(page).to_have_url(f"{base}/")
    page.click("#connect")
    expect(page.locator("#status")).to_have_attribute("data-state", "connected")
    page.fill("#subscribe-destination", "/topic/sign-in")
    page.click("#subscribe")
    expect(page.locator('#subscriptions li[data-state="active"]')).to_have_count(1)
    page.fill("#send-destination", "/topic/sign-in")
    page.fill("#body", "signed in once")
    page.click("#send")
    expect(page.locator("#messages tr.message td").nth(2)).to_have_text("signed in once")

    page.click("#pages a:text-is('console')")
    page.click("#sign-out")
    sign_in_dialog(page)
    expect(page.locator("#console")).to_be_hidden()
    stored = page.evaluate("sessionStorage.getItem('stompbroker.sign-in')")
    assert stored is None
    log = auth_broker.log()
    assert PASSWORD not in log
    # The dashboard tried anonymously once and waited for the sign-in, not every few seconds.
    assert log.count("login failed for (anonymous)") <= 2


def test_a_bearer_token_signs_in_the_demo_then_the_dashboard(
    auth_broker: BrokerProcess, page: Page
) -> None:
    """
    The demo's refused CONNECT opens the sign-in; a pasted token connects it (as CONNECT's
    passcode) and the dashboard follows the stats with the same token; it is in no URL.
    """
    token = tokens.make_token(
        time.time(), tokens.SECRET, "HS256", scope="stompbroker.read stompbroker.write"
    )
    base = f"http://127.0.0.1:{auth_broker.http_port}"
    page.goto(f"{base}/")
    page.click("#connect")
    sign_in_dialog(page)
    expect(page.locator("#login-error")).to_contain_text("login failed")
    page.fill("#token", token)
    page.click("#sign-in")
    expect(page.locator("#status")).to_have_attribute("data-state", "connected")
    expect(page.locator("#who")).to_have_text("signed in as alice")
    page.click("#pages a:text-is('dashboard')")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("body")).not_to_have_attribute("data-points", "0")
    assert token not in page.url
    assert token not in auth_broker.log()
