"""
Virtual hosts on the real broker (``twistd -n stompbroker --config FILE``), driven
by ``stomp.py``, as docs/virtual-hosts.md says: CONNECT's ``host`` selects one.
"""

from __future__ import annotations

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
"""

EVERYTHING = '[users.alice]\nread = ["/queue/#", "/topic/#"]\nwrite = ["/queue/#", "/topic/#"]\n'
SHOP_ONLY_ORDERS = '[users.alice]\nread = ["/queue/orders.#"]\nwrite = ["/queue/orders.#"]\n'


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("vhosts")
    users = write_users(workdir / "users.txt", ("alice", "secret", ()))
    files = {}
    for name, rules in (("default", EVERYTHING), ("shop", SHOP_ONLY_ORDERS), ("lab", EVERYTHING)):
        files[f"{name}_access"] = workdir / f"{name}.toml"
        files[f"{name}_access"].write_text(rules)
    config = workdir / "broker.toml"
    config.write_text(CONFIG.format(users=users, **files))
    with BrokerProcess(
        workdir, "--config", str(config), "--data-dir", "none", http=None
    ) as process:
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
