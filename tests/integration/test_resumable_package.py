"""
The npm package of ``resumable.js`` (``clients/js``, docs/resume.md): what
``npm pack`` makes of it holds the very file the broker serves at
``/static/resumable.js``, declares ``@stomp/stompjs`` as what it runs on, and,
imported by its package name in a real browser (Debian's Chromium, headless,
driven by Playwright) the way an application's bundler resolves it, keeps a
session across a dropped WebSocket on a real broker: the page gets what was
published while it was away, once, and is told that its session resumed.

The application's page comes from an origin of its own (a plain HTTP server
of the test's), with an import map for the package and the vendored
``@stomp/stompjs`` ES module build, which it serves from a ``node_modules`` as
an application would; the page talks to the broker over WebSocket only.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import require_chromium
from tests.support.clients import publish
from tests.support.process import ROOT, BrokerProcess, module_broker

require_chromium()

from playwright.sync_api import Page  # noqa: E402

PACKAGE = ROOT / "clients" / "js"
SERVED = ROOT / "stompbroker" / "web" / "static" / "resumable.js"
STOMPJS = ROOT / "stompbroker" / "web" / "static" / "vendor" / "stompjs" / "esm6"

package_broker = module_broker("package_broker")


def npm() -> str:
    """
    :returns: the path of ``npm``.
    :raises pytest.skip.Exception: if it is missing (a failure where
        ``STOMPBROKER_REQUIRE_NPM=1``, as ``.ci/run`` sets).
    """
    found = shutil.which("npm")
    if found is None:
        reason = "npm is not installed (apt-get install npm, as .ci/run does); issue 37"
        if os.environ.get("STOMPBROKER_REQUIRE_NPM") == "1":
            pytest.fail(f"{reason}, and STOMPBROKER_REQUIRE_NPM=1 requires it")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package's directory as ``npm pack`` packs it, unpacked."""
    out = tmp_path_factory.mktemp("npm-pack")
    done = subprocess.run(
        [npm(), "pack", "--json", "--pack-destination", str(out)],
        cwd=PACKAGE,
        capture_output=True,
        timeout=120,
        check=True,
    )
    [report] = json.loads(done.stdout)
    with tarfile.open(out / report["filename"]) as tarball:
        tarball.extractall(out, filter="data")
    yield out / "package"


def test_the_package_holds_the_file_the_broker_serves(packed: Path) -> None:
    manifest = json.loads((packed / "package.json").read_text())
    assert manifest["name"] == "stompbroker-resumable"
    assert manifest["type"] == "module"
    assert "@stomp/stompjs" in manifest["peerDependencies"]
    entry = packed / manifest["exports"]["."]
    assert entry.read_bytes() == SERVED.read_bytes()
    assert SERVED.resolve() == (PACKAGE / "resumable.js").resolve()
    assert sorted(path.name for path in packed.iterdir()) == [
        "README.md",
        "package.json",
        "resumable.js",
    ]


def app_page(broker: BrokerProcess, entry: str) -> str:
    """:returns: the application's page: the package by its name, stompjs by its."""
    imports = {
        "@stomp/stompjs": "/node_modules/@stomp/stompjs/esm6/index.js",
        "stompbroker-resumable": f"/node_modules/stompbroker-resumable/{entry}",
    }
    return f"""<!doctype html>
<link rel="icon" href="data:,">
<script type="importmap">{json.dumps({"imports": imports})}</script>
<script type="module">
  import {{ Client }} from "@stomp/stompjs";
  import {{ ResumableSession }} from "stompbroker-resumable";

  const received = [];
  const connects = [];
  const receipts = [];
  const client = new Client({{ brokerURL: "{broker.ws_url}", reconnectDelay: 500 }});
  client.onUnhandledReceipt = (frame) => receipts.push(frame.headers["receipt-id"]);
  const session = new ResumableSession(client, {{
    onConnect: (frame, state) => connects.push(state),
  }});
  session.subscribe("/topic/packaged", (message) => received.push(message.body),
                    {{ receipt: "subscribed" }});
  client.activate();
  window.app = {{ client, session, received, connects, receipts }};
</script>
"""


@pytest.fixture
def app(package_broker: BrokerProcess, packed: Path, tmp_path: Path) -> Iterator[str]:
    """
    The application's origin, a server of its own on loopback (Chromium lets
    only a local page open a WebSocket to a loopback address): its page, and
    its ``node_modules`` of the two packages.

    :returns: the page's URL.
    """
    entry = json.loads((packed / "package.json").read_text())["exports"]["."]
    modules = tmp_path / "node_modules"
    (modules / "@stomp").mkdir(parents=True)
    (modules / "@stomp" / "stompjs").mkdir()
    (modules / "@stomp" / "stompjs" / "esm6").symlink_to(STOMPJS)
    (modules / "stompbroker-resumable").symlink_to(packed)
    (tmp_path / "index.html").write_text(app_page(package_broker, entry.removeprefix("./")))
    handler = functools.partial(QuietHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()
        serving.join()


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves the application's files without a line on stderr per request."""

    def log_message(self, format: str, *args: Any) -> None:
        return None


def test_the_packed_package_resumes_a_session_in_chromium(
    package_broker: BrokerProcess, app: str, page: Page
) -> None:
    page.goto(app)
    page.wait_for_function("() => window.app && window.app.receipts.includes('subscribed')")
    assert page.evaluate("window.app.connects") == [{"resumed": False, "gap": False}]
    address = package_broker.address
    publish(address, "/topic/packaged", ["before"])
    page.wait_for_function("() => window.app.received.length === 1")

    page.evaluate("window.app.client.reconnectDelay = 3000; window.app.client.forceDisconnect()")
    # The broker has seen the WebSocket close by the time the page has; a moment more.
    time.sleep(0.3)
    publish(address, "/topic/packaged", ["away 1", "away 2"])
    page.wait_for_function("() => window.app.connects.length === 2", timeout=15_000)
    assert page.evaluate("window.app.connects[1]") == {"resumed": True, "gap": False}
    publish(address, "/topic/packaged", ["after"])
    page.wait_for_function("() => window.app.received.length >= 4")
    page.wait_for_timeout(300)
    assert page.evaluate("window.app.received") == ["before", "away 1", "away 2", "after"]
