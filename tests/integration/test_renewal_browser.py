"""
The token renewal example of docs/security.md, run in a real browser: Debian's
Chromium, headless, driven by Playwright, against a broker with ``--auth
jwt:secret=...``.

The page is ``/static/examples/renewal.html`` from the broker's web port, whose
import map resolves ``@stomp/stompjs`` to the vendored ES module build; the test
imports ``/static/examples/renewal.js`` into it (the module the documentation
shows, word for word: :func:`test_the_documented_example_is_the_served_module`)
and gives it a ``getToken()`` that signs HS256 tokens living three seconds.  A
``stomp.py`` client with a long-lived token publishes the prices it watches.
On the same page, stompjs reads the ERROR of a login refused for an expired token.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
import stomp

from tests.support import tokens
from tests.support.browser import chromium_page, require_chromium
from tests.support.process import ROOT, BrokerProcess

require_chromium()

from playwright.sync_api import Page  # noqa: E402
from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402

EXAMPLE = ROOT / "stompbroker" / "web" / "static" / "examples" / "renewal.js"
#: How long the page's tokens live, in seconds: short, so that the test sees one expire.
LIFETIME = 3
#: What the example logs, and what the page logs for the broker's ERROR at expiry.
RENEWED = "credentials renewed"
EXPIRED = "credentials expired"
#: How often a price is published before the page must have shown it (half a second apart).
PUBLISH_TRIES = 10
#: Imports the example into the page and starts it; what it shows goes to ``window.received``.
START = """
async ({ brokerURL, renewEvery }) => {
  const { watchPrices } = await import('./renewal.js');
  window.received = [];
  window.client = watchPrices({
    brokerURL,
    getToken: () => window.getToken(),
    show: (body) => window.received.push(body),
    renewEvery,
  });
}
"""


def documented_example() -> str:
    """:returns: the ``js`` block of docs/security.md that defines ``watchPrices``."""
    text = (ROOT / "docs" / "security.md").read_text()
    blocks = re.findall(r"```js\n(.*?)```", text, re.S)
    [example] = [block for block in blocks if "export function watchPrices" in block]
    return example


def test_the_documented_example_is_the_served_module() -> None:
    """The renewal example in docs/security.md is the module the browser test runs, verbatim."""
    assert documented_example() == EXAMPLE.read_text()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that takes HS256 tokens signed with the tests' secret, and nothing else."""
    workdir = tmp_path_factory.mktemp("renewal")
    process = BrokerProcess(
        workdir, "--auth", tokens.hs256_auth(workdir), "--data-dir", "none", "--heartbeat", "0,0"
    )
    yield process
    process.stop()


class TokenSource:
    """The page's ``getToken()``: each call signs a fresh token for alice and keeps its expiry."""

    def __init__(self) -> None:
        self.expiries: list[float] = []

    def sign(self) -> str:
        """:returns: a token that lives LIFETIME seconds from now."""
        now = time.time()
        token = tokens.make_token(now, tokens.SECRET, algorithm="HS256", exp=int(now) + LIFETIME)
        self.expiries.append(jwt.decode(token, options={"verify_signature": False})["exp"])
        return token


class RenewalPage:
    """The example running in ``page``, with what it logs and the WebSockets it opens."""

    def __init__(self, page: Page, broker: BrokerProcess, renew_every: float) -> None:
        self.page = page
        self.tokens = TokenSource()
        self.logged: list[str] = []
        self.websockets: list[Any] = []
        page.on("console", lambda message: self.logged.append(message.text))
        page.on("websocket", lambda websocket: self.websockets.append(websocket))
        page.expose_function("getToken", self.tokens.sign)
        page.goto(f"http://127.0.0.1:{broker.http_port}/static/examples/renewal.html")
        page.evaluate(START, {"brokerURL": broker.ws_url, "renewEvery": renew_every * 1000})
        page.wait_for_function("window.client.connected")

    def wait_until(self, moment: float) -> None:
        """Let the page run (and call ``getToken``) until the POSIX time ``moment``."""
        self.page.wait_for_timeout(max(0.0, moment - time.time()) * 1000)

    def receives(self, prices: stomp.Connection12, body: str) -> None:
        """
        Publish ``body`` until the page shows it: the example subscribes without a
        receipt, so the first price may reach the broker before its SUBSCRIBE does.
        """
        for _ in range(PUBLISH_TRIES):
            prices.send("/topic/prices.eur", body)
            try:
                self.page.wait_for_function(
                    "(body) => window.received.includes(body)", arg=body, timeout=500
                )
            except PlaywrightTimeout:
                continue
            return
        raise AssertionError(f"the page never showed {body!r}")

    def stop(self) -> None:
        self.page.evaluate("window.client.deactivate()")


@pytest.fixture
def prices(broker: BrokerProcess) -> Iterator[stomp.Connection12]:
    """A ``stomp.py`` publisher of prices, logged in with a token that lives an hour."""
    connection = stomp.Connection12([broker.address])
    token = tokens.make_token(time.time(), tokens.SECRET, algorithm="HS256")
    connection.connect("", token, wait=True)
    yield connection
    connection.disconnect()


def test_renewing_keeps_the_browser_connected_past_the_first_tokens_expiry(
    broker: BrokerProcess, prices: stomp.Connection12
) -> None:
    """
    Renewing every second, the example's connection outlives its first token by
    seconds: each renewal gets its RECEIPT, no ERROR comes, there is one WebSocket,
    and a price published after that expiry still arrives.
    """
    with chromium_page() as page:
        example = RenewalPage(page, broker, renew_every=1)
        example.receives(prices, "1.08")
        first_expiry = example.tokens.expiries[0]
        example.wait_until(first_expiry + 1.5)
        example.receives(prices, "1.09")
        assert example.logged.count(RENEWED) >= 2
        assert page.evaluate("window.client.connected")
        assert len(example.websockets) == 1
        assert not example.websockets[0].is_closed()
        assert len(example.tokens.expiries) >= 3
        example.stop()
    assert not any(text.startswith(EXPIRED) for text in example.logged)
    assert EXPIRED not in broker.log()


def test_without_renewal_the_browser_gets_the_expiry_error_and_reconnects(
    broker: BrokerProcess, prices: stomp.Connection12
) -> None:
    """
    Renewing later than the token lives, the example's client gets the ERROR
    "credentials expired" at its expiry and its WebSocket closes; stompjs then
    reconnects with a fresh token from beforeConnect and the prices flow again.
    """
    with chromium_page((EXPIRED,)) as page:
        example = RenewalPage(page, broker, renew_every=60)
        first_expiry = example.tokens.expiries[0]
        page.wait_for_event(
            "console",
            lambda message: message.text.startswith(EXPIRED),
            timeout=(LIFETIME + 5) * 1000,
        )
        assert time.time() >= first_expiry - 0.1
        assert RENEWED not in example.logged
        page.wait_for_function("!window.client.connected")
        assert example.websockets[0].is_closed()
        page.wait_for_function("window.client.connected", timeout=15_000)
        assert len(example.websockets) == 2
        assert len(example.tokens.expiries) == 2
        example.receives(prices, "1.10")
        example.stop()


#: Connects with stompjs and a passcode; resolves with the ERROR's ``message`` as stompjs reads it.
REFUSED_LOGIN = """
async ({ brokerURL, passcode }) => {
  const { Client } = await import('@stomp/stompjs');
  return await new Promise((resolve) => {
    const client = new Client({
      brokerURL,
      connectHeaders: { login: '', passcode },
      reconnectDelay: 0,
      onStompError: (frame) => {
        client.deactivate();
        resolve(frame.headers.message);
      },
    });
    client.activate();
  });
}
"""


def test_stompjs_reads_a_refused_login_as_sent(broker: BrokerProcess) -> None:
    """
    The ERROR of a refused login comes before CONNECTED, so the broker does not
    escape it: stompjs, which undoes escapes only once connected, shows
    ``login failed: token expired``, not ``login failed\\c token expired``.
    """
    now = time.time()
    expired = tokens.make_token(now, tokens.SECRET, algorithm="HS256", exp=int(now) - 60)
    with chromium_page() as page:
        page.goto(f"http://127.0.0.1:{broker.http_port}/static/examples/renewal.html")
        message = page.evaluate(REFUSED_LOGIN, {"brokerURL": broker.ws_url, "passcode": expired})
    assert message.startswith("login failed: "), message
    assert "\\" not in message
