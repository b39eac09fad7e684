"""
Virtual hosts on the real broker (``twistd -n stompbroker --config FILE``), driven
by ``stomp.py``, as docs/virtual-hosts.md says: CONNECT's ``host`` selects one.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import stomp

from tests.support.clients import Collector, connect
from tests.support.passwords import write_users
from tests.support.process import BrokerProcess

CONFIG = """\
[security]
auth = ["passwd:{users}"]
access = "{default_access}"

[vhost.shop]
aliases = ["shop.example.com"]
access = "{shop_access}"

[vhost.lab]
access = "{lab_access}"

[[policy]]
name = "lab-capped"
pattern = "capped.>"
apply-to = "queues"
vhost = "lab"
max-length = 1
overflow = "reject-publish"
"""

EVERYTHING = '[users.alice]\nread = ["/queue/#", "/topic/#"]\nwrite = ["/queue/#", "/topic/#"]\n'
SHOP_ONLY_ORDERS = (
    '[users.alice]\nread = ["/queue/orders.#"]\nwrite = ["/queue/orders.#"]\n'
    'admin = ["/queue/orders.#"]\n'
)
#: The broker's file also lets ``ops`` look at everything (connections need ``read`` on ``#``).
DEFAULT_RULES = EVERYTHING + '[users.ops]\nread = ["#"]\n'


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("vhosts")
    users = write_users(workdir / "users.txt", ("alice", "secret", ()), ("ops", "secret", ()))
    files = {}
    rules_of = (("default", DEFAULT_RULES), ("shop", SHOP_ONLY_ORDERS), ("lab", EVERYTHING))
    for name, rules in rules_of:
        files[f"{name}_access"] = workdir / f"{name}.toml"
        files[f"{name}_access"].write_text(rules)
    config = workdir / "broker.toml"
    config.write_text(CONFIG.format(users=users, **files))
    with BrokerProcess(workdir, "--config", str(config), "--data-dir", "none") as process:
        yield process


def open_in(
    address: tuple[str, int], vhost: str | None, version: str = "1.2"
) -> tuple[Any, Collector]:
    """A ``stomp.py`` connection whose CONNECT says ``host:vhost`` (its default without one)."""
    if vhost is None:
        return connect(address, version, login="alice", passcode="secret")
    connection = stomp.Connection12([address], vhost=vhost, auto_decode=False)
    collector = Collector()
    connection.set_listener("collector", collector)
    connection.connect("alice", "secret", wait=True)
    return connection, collector


def send_with_receipt(connection: Any, events: Collector, destination: str, body: str) -> None:
    receipt = uuid.uuid4().hex
    connection.send(destination, body, receipt=receipt)
    assert events.wait_for(lambda: receipt in events.receipts), events.errors


def test_the_same_queue_name_in_two_hosts_is_two_queues(hosted: BrokerProcess) -> None:
    queue = f"/queue/orders.{uuid.uuid4().hex[:8]}"
    shop, shop_events = open_in(hosted.address, "shop.example.com")
    lab, lab_events = open_in(hosted.address, "lab")
    send_with_receipt(shop, shop_events, queue, "for the shop")
    send_with_receipt(lab, lab_events, queue, "for the lab")
    shop.subscribe(queue, id="1", ack="auto")
    lab.subscribe(queue, id="1", ack="auto")
    assert shop_events.wait_for(lambda: shop_events.bodies() == [b"for the shop"])
    assert lab_events.wait_for(lambda: lab_events.bodies() == [b"for the lab"])
    assert shop_events.messages[0].headers["destination"] == queue
    shop.disconnect()
    lab.disconnect()


def test_slash_and_no_host_go_to_the_default_host(hosted: BrokerProcess) -> None:
    queue = f"/queue/plain.{uuid.uuid4().hex[:8]}"
    old, old_events = open_in(hosted.address, None, "1.0")
    send_with_receipt(old, old_events, queue, "from 1.0")
    local, local_events = open_in(hosted.address, None)  # stomp.py sends host:127.0.0.1
    send_with_receipt(local, local_events, queue, "from 127.0.0.1")
    slash, slash_events = open_in(hosted.address, "/")
    slash.subscribe(queue, id="1", ack="auto")
    assert slash_events.wait_for(
        lambda: slash_events.bodies() == [b"from 1.0", b"from 127.0.0.1"]
    ), slash_events.bodies()
    lab, lab_events = open_in(hosted.address, "lab")
    lab.subscribe(queue, id="1", ack="auto")
    send_with_receipt(lab, lab_events, queue, "lab's own")
    assert lab_events.wait_for(lambda: lab_events.bodies() == [b"lab's own"])
    for connection in (old, local, slash, lab):
        connection.disconnect()


def test_each_host_has_its_own_access_rules(hosted: BrokerProcess) -> None:
    lab, lab_events = open_in(hosted.address, "lab")
    send_with_receipt(lab, lab_events, "/queue/anything", "allowed in the lab")
    lab.disconnect()
    shop, shop_events = open_in(hosted.address, "shop")
    send_with_receipt(shop, shop_events, "/queue/orders.a", "allowed in the shop")
    shop.send("/queue/anything", "refused in the shop", receipt="r")
    assert shop_events.wait_for(lambda: bool(shop_events.errors))
    assert (
        shop_events.errors[0].headers["message"]
        == "access denied: no write right on '/queue/anything'"
    )


def test_a_policy_of_a_host_limits_that_hosts_queues_only(hosted: BrokerProcess) -> None:
    """``lab-capped`` (``vhost = "lab"``) caps lab's ``/queue/capped.*``, not the default host's."""
    queue = f"/queue/capped.{uuid.uuid4().hex[:8]}"
    plain, plain_events = open_in(hosted.address, None)
    for body in ("one", "two"):
        send_with_receipt(plain, plain_events, queue, body)
    plain.disconnect()
    lab, lab_events = open_in(hosted.address, "lab")
    send_with_receipt(lab, lab_events, queue, "one")
    lab.send(queue, "two", receipt="over")
    assert lab_events.wait_for(lambda: bool(lab_events.errors))
    refusal = lab_events.errors[0]
    assert "max-length 1" in refusal.body.decode() and "lab-capped" in refusal.body.decode()
    code, rows = api(hosted, "GET", "destinations")
    assert code == 200
    capped = sorted(
        (row["vhost"], row["depth"], row["policy"]) for row in rows if row["destination"] == queue
    )
    assert capped == [("/", 2, None), ("lab", 1, "lab-capped")]


def api(process: BrokerProcess, method: str, path: str, user: str = "alice") -> tuple[int, Any]:
    """:returns: the status and JSON of one management API call, as ``user``."""
    token = base64.b64encode(f"{user}:secret".encode()).decode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{process.http_port}/api/{path}",
        method=method,
        headers={"Authorization": f"Basic {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            code = response.status
    except urllib.error.HTTPError as error:
        text, code = error.read().decode(), error.code
    # No internal name (with the marker U+001D) is ever shown.
    assert "\\u001d" not in text.lower()
    return code, json.loads(text)


def test_the_api_shows_and_acts_per_virtual_host(hosted: BrokerProcess) -> None:
    """
    Destinations and connections carry their vhost and client names; ?vhost= filters and
    names the host of a purge; the shop's access file gives alice her rights there.
    """
    queue = f"/queue/orders.{uuid.uuid4().hex[:8]}"
    shop, shop_events = open_in(hosted.address, "shop")
    default, default_events = open_in(hosted.address, "/")
    send_with_receipt(shop, shop_events, queue, "shop-1")
    send_with_receipt(shop, shop_events, queue, "shop-2")
    send_with_receipt(default, default_events, queue, "default")
    code, rows = api(hosted, "GET", "destinations")
    assert code == 200
    mine = sorted((row["vhost"], row["depth"]) for row in rows if row["destination"] == queue)
    assert mine == [("/", 1), ("shop", 2)]
    _, shop_rows = api(hosted, "GET", "destinations?vhost=shop")
    assert {row["vhost"] for row in shop_rows} == {"shop"}
    segment = urllib.parse.quote(queue, safe="")
    code, browsed = api(hosted, "GET", f"destinations/{segment}/messages?vhost=shop")
    assert [(m["destination"], m["body"]) for m in browsed] == [
        (queue, "shop-1"),
        (queue, "shop-2"),
    ]
    # alice has no admin right in the default host (the broker's file).
    code, error = api(hosted, "DELETE", f"destinations/{segment}/messages")
    assert code == 403 and "virtual host '/'" in error["detail"]
    code, purged = api(hosted, "DELETE", f"destinations/{segment}/messages?vhost=shop")
    assert (code, purged["purged"], purged["vhost"]) == (200, 2, "shop")
    _, rows = api(hosted, "GET", "destinations")
    mine = sorted((row["vhost"], row["depth"]) for row in rows if row["destination"] == queue)
    assert mine == [("/", 1), ("shop", 0)]
    code, connections = api(hosted, "GET", "connections?vhost=shop", user="ops")
    assert code == 200 and connections and {c["vhost"] for c in connections} == {"shop"}
    code, error = api(hosted, "GET", "destinations?vhost=nowhere")
    assert (code, error["error"]) == (404, "unknown virtual host")
    for connection in (shop, default):
        connection.disconnect()
