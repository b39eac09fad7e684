"""
The management console in a real browser: Debian's Chromium, headless, driven by
Playwright, against a real broker with ``--auth``.  An operator signs in, sees a
queue fill, browses it (a body that looks like HTML is shown as text), purges it
and closes a connection, confirming each destructive step.  A screenshot is
kept in ``test-artifacts/console.png``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support import tokens
from tests.support.browser import ARTIFACTS, chromium_page, require_chromium
from tests.support.clients import connect, publish
from tests.support.management import managed_broker
from tests.support.process import BrokerProcess
from tests.support.resume import cut, subscribed

require_chromium()

from playwright.sync_api import Page, expect  # noqa: E402

#: What Chromium logs for each refused call the test makes on purpose (a wrong password, 401;
#: a purge without the right, 403).
REFUSED_CALL = "Failed to load resource: the server responded with a status of 40"


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("console")
    process = managed_broker(workdir, "--auth", tokens.hs256_auth(workdir))
    yield process
    process.stop()


@pytest.fixture
def page() -> Iterator[Page]:
    """A fresh page in headless Chromium; JavaScript errors but REFUSED_CALL fail the test."""
    with chromium_page((REFUSED_CALL,)) as opened:
        yield opened


def sign_in(page: Page, broker: BrokerProcess) -> None:
    """Open the console and sign in as ``admin``."""
    page.goto(f"http://127.0.0.1:{broker.http_port}/console")
    page.fill("#user", "admin")
    page.fill("#password", "secret")
    page.click("#sign-in")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")


def show(page: Page, view: str) -> None:
    """Open one of the console's views from its menu."""
    page.click(f'#views a[data-view="{view}"]')
    expect(page.locator(f"#view-{view}")).to_be_visible()


def confirm(page: Page, text: str) -> None:
    """Accept the console's confirmation dialog, which must say ``text``."""
    expect(page.locator("#confirm-text")).to_contain_text(text)
    page.click("#confirm-ok")


def test_sign_in_watch_a_queue_fill_browse_purge_and_close(
    console_broker: BrokerProcess,
    page: Page,
) -> None:
    """
    The operator's round: sign in, a queue fills, browse it, purge it, close a connection;
    the connection's row shows its messages and bytes in and out, and since when it is connected.
    """
    page.goto(f"http://127.0.0.1:{console_broker.http_port}/console")
    expect(page.locator("#console")).to_be_hidden()
    page.fill("#user", "admin")
    page.fill("#password", "wrong")
    page.click("#sign-in")
    expect(page.locator("#login-error")).to_contain_text("login failed")
    page.fill("#password", "secret")
    page.click("#sign-in")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("#login")).to_be_hidden()

    connection, inbox = connect(console_broker.address)
    try:
        for body in ("first", "<b id=injected>bold</b>", "third"):
            connection.send("/queue/console", body, headers={"persistent": "true"})
        show(page, "connections")
        client_rows = page.locator('#connections tr[data-connection^="session-"]')
        expect(client_rows.locator("td.messages-in")).to_have_text("3")
        expect(client_rows.locator("td.messages-out")).to_have_text("0")
        expect(client_rows.locator("td.since")).to_contain_text(" UTC")
        bytes_in = client_rows.locator("td.bytes-in").inner_text()
        assert bytes_in.endswith(" B") and int(bytes_in.split()[0]) > 3 * len("third")

        show(page, "destinations")
        row = page.locator('#destinations tr[data-destination="/queue/console"]')
        expect(row.locator("td.depth")).to_have_text("3")
        row.get_by_role("button", name="Browse").click()
        messages = page.locator("#messages li.message")
        expect(messages).to_have_count(3)
        expect(messages.nth(1).locator("pre.body")).to_have_text("<b id=injected>bold</b>")
        expect(page.locator("#injected")).to_have_count(0)

        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "console.png"), full_page=True)

        page.go_back()
        row.get_by_role("button", name="Purge").click()
        page.click("#confirm-cancel")
        expect(row.locator("td.depth")).to_have_text("3")
        row.get_by_role("button", name="Purge").click()
        confirm(page, "Purge every message waiting in /queue/console")
        expect(page.locator("#destinations-notice")).to_contain_text("purged 3 messages")
        expect(row.locator("td.depth")).to_have_text("0")

        show(page, "connections")
        expect(client_rows).to_have_count(1)
        client_rows.get_by_role("button", name="Close").click()
        confirm(page, "The client gets an ERROR")
        assert inbox.wait_for(lambda: inbox.errors, 10.0)
        assert inbox.errors[0].headers["message"] == "closed by an operator"
        expect(client_rows).to_have_count(0)
    finally:
        connection.disconnect()


def test_a_detached_session_is_listed_and_ended_with_confirmation(
    console_broker: BrokerProcess,
    page: Page,
) -> None:
    """A resumable client whose socket was cut shows under Detached sessions; End removes it."""
    sign_in(page, console_broker)
    first, inbox = subscribed(console_broker, "/topic/console-detached", "d")
    cut(first)
    publish(console_broker.address, "/topic/console-detached", ["missed"])
    show(page, "detached")
    row = page.locator(f'#detached tr[data-session="{inbox.connected["session"]}"]')
    expect(row.locator("td.missed")).to_have_text("1")
    expect(row.locator("td.subscriptions")).to_have_text("1")
    expect(row.locator("td.expires")).to_contain_text(" UTC")
    row.get_by_role("button", name="End").click()
    confirm(page, "Its client can no longer resume it")
    expect(page.locator("#detached-notice")).to_contain_text(f"ended {inbox.connected['session']}")
    expect(row).to_have_count(0)


def test_move_with_confirmation_and_see_a_queues_consumers(
    console_broker: BrokerProcess,
    page: Page,
) -> None:
    """Move one message after confirming; browsing the queue it went to shows its consumer."""
    sign_in(page, console_broker)
    connection, inbox = connect(console_broker.address)
    try:
        for body in ("a", "b"):
            connection.send("/queue/moving", body)
        show(page, "destinations")
        row = page.locator('#destinations tr[data-destination="/queue/moving"]')
        expect(row.locator("td.depth")).to_have_text("2")
        row.get_by_role("button", name="Move").click()
        expect(page.locator("#move-from")).to_have_value("/queue/moving")
        page.fill("#move-to", "/queue/moved")
        page.fill("#move-count", "1")
        page.click("#move button[type=submit]")
        page.click("#confirm-cancel")
        expect(row.locator("td.depth")).to_have_text("2")
        page.click("#move button[type=submit]")
        confirm(page, "Move 1 messages waiting in /queue/moving to /queue/moved")
        expect(page.locator("#move-notice")).to_contain_text("moved 1 messages to /queue/moved")
        expect(row.locator("td.depth")).to_have_text("1")

        connection.subscribe("/queue/moved", id="m", ack="client-individual")
        assert inbox.wait_for(lambda: inbox.bodies() == [b"a"], 10.0)
        moved = page.locator('#destinations tr[data-destination="/queue/moved"]')
        expect(moved.locator("td").nth(3)).to_have_text("1")
        moved.get_by_role("button", name="Browse").click()
        consumers = page.locator("#consumers tbody tr")
        expect(consumers).to_have_count(1)
        expect(consumers.locator("td").nth(1)).to_have_text("m")
        expect(consumers.locator("td").nth(3)).to_have_text("1")
    finally:
        connection.disconnect()


def test_sign_in_with_a_bearer_token_whose_scopes_decide(
    console_broker: BrokerProcess,
    page: Page,
) -> None:
    """
    A pasted token signs in; its read scope shows the queues, and a purge it lacks the admin
    right for is refused, leaving the queue as it was.
    """
    connection, _ = connect(console_broker.address)
    connection.send("/queue/scoped", "kept")
    connection.disconnect()
    page.goto(f"http://127.0.0.1:{console_broker.http_port}/console")
    reader = tokens.make_token(time.time(), tokens.SECRET, "HS256", scope="stompbroker.read")
    page.fill("#token", reader)
    page.click("#sign-in")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    show(page, "destinations")
    row = page.locator('#destinations tr[data-destination="/queue/scoped"]')
    expect(row.locator("td.depth")).to_have_text("1")
    row.get_by_role("button", name="Purge").click()
    confirm(page, "Purge every message waiting in /queue/scoped")
    expect(page.locator("#destinations-notice")).to_contain_text("403 no admin right")
    expect(row.locator("td.depth")).to_have_text("1")
