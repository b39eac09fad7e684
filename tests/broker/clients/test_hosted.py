"""Virtual hosts on a real broker: sessions CONNECT with ``host`` and see their host only."""

from __future__ import annotations

import pytest

from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.routing.syntax import HOST_MARKER
from stompbroker.broker.routing.virtual_hosts import VirtualHost, VirtualHosts
from stompbroker.protocol.session import SessionConfig, StompSession
from stompbroker.transport.peer_credentials import PeerCredentials
from tests.support.broker import Client, World

HOSTS = VirtualHosts([VirtualHost("shop", aliases=("shop.example.com",)), VirtualHost("lab")])


@pytest.fixture
def world() -> World:
    return World(virtual_hosts=VirtualHosts(HOSTS.hosts.values()))


def test_the_same_queue_name_in_two_hosts_is_two_queues(world: World) -> None:
    shop = world.client(host="shop")
    lab = world.client(host="lab")
    shop.send_frame("SEND", b"for the shop", destination="/queue/orders")
    lab.send_frame("SEND", b"for the lab", destination="/queue/orders")
    shop.send_frame("SUBSCRIBE", id="1", destination="/queue/orders")
    lab.send_frame("SUBSCRIBE", id="1", destination="/queue/orders")
    (in_shop,) = shop.messages()
    (in_lab,) = lab.messages()
    assert (in_shop.body, in_shop.get("destination")) == (b"for the shop", "/queue/orders")
    assert (in_lab.body, in_lab.get("destination")) == (b"for the lab", "/queue/orders")
    assert "/queue/orders" not in world.broker.engine.queues


def test_an_alias_selects_its_host_and_acks_settle(world: World) -> None:
    shop = world.client(host="shop.example.com")
    shop.send_frame("SUBSCRIBE", id="1", destination="/queue/orders", ack="client-individual")
    world.client(host="shop").send_frame("SEND", b"one", destination="/queue/orders")
    (message,) = shop.messages()
    shop.ack(message, receipt="r")
    assert [frame.command for frame in shop.frames()] == ["RECEIPT"]
    queue = world.broker.engine.queues[f"/queue/{HOSTS.hosts['shop'].prefix}orders"]
    assert not queue.pending


def test_unknown_and_absent_hosts_go_to_the_default_host(world: World) -> None:
    slash = world.client(host="/")
    old = world.client(version="1.0")
    local = world.client(host="localhost")
    slash.send_frame("SUBSCRIBE", id="1", destination="/topic/news")
    old.send_frame("SEND", b"from 1.0", destination="/topic/news")
    local.send_frame("SEND", b"from localhost", destination="/topic/news")
    world.client(host="shop").send_frame("SEND", b"from the shop", destination="/topic/news")
    assert [frame.body for frame in slash.messages()] == [b"from 1.0", b"from localhost"]


def test_default_wildcards_do_not_reach_other_hosts(world: World) -> None:
    default = world.client(host="/")
    shop = world.client(host="shop")
    default.send_frame("SUBSCRIBE", id="1", destination="/topic/>")
    shop.send_frame("SUBSCRIBE", id="1", destination="/topic/>")
    shop.send_frame("SEND", b"shop", destination="/topic/a.b")
    default.send_frame("SEND", b"default", destination="/topic/a.b")
    assert [(f.body, f.get("destination")) for f in shop.messages()] == [(b"shop", "/topic/a.b")]
    assert [f.body for f in default.messages()] == [b"default"]


def test_a_client_may_not_send_the_marker(world: World) -> None:
    default = world.client(host="/")
    default.send_frame("SEND", b"sneak", destination=f"/queue/{HOST_MARKER}shop/orders")
    (error,) = default.frames()
    assert error.command == "ERROR"
    assert error.get("message") == "invalid character in destination"


def test_unknown_hosts_may_be_refused() -> None:
    world = World(virtual_hosts=VirtualHosts(HOSTS.hosts.values(), refuse_unknown=True))
    client = world.client(host="/")
    assert client.connected.command == "CONNECTED"
    refused = Client.__new__(Client)
    refused.version, refused.output, refused.closed = "1.2", bytearray(), False
    refused.credentials = PeerCredentials(None)
    refused.session = StompSession(world.broker, refused, world.clock, SessionConfig())
    refused.session.connection_made()
    refused.send_frame("CONNECT", accept_version="1.2", host="nowhere")
    (error,) = refused.frames()
    assert (error.command, error.get("message")) == ("ERROR", "unknown virtual host")
    assert "'nowhere' names no virtual host" in error.body.decode()
    assert refused.closed


def test_dead_letters_stay_in_their_host() -> None:
    world = World(
        policy=DeliveryPolicy(max_redeliveries=0),
        virtual_hosts=VirtualHosts(HOSTS.hosts.values()),
    )
    shop = world.client(host="shop")
    shop.send_frame("SUBSCRIBE", id="1", destination="/queue/jobs", ack="client-individual")
    shop.send_frame("SEND", b"poison", destination="/queue/jobs")
    (message,) = shop.messages()
    shop.ack(message, command="NACK")
    shop.send_frame("SUBSCRIBE", id="2", destination="/queue/DLQ.jobs")
    (dead,) = shop.messages()
    assert dead.get("destination") == "/queue/DLQ.jobs"
    assert dead.get("original-destination") == "/queue/jobs"
    assert "/queue/DLQ.jobs" not in world.broker.engine.queues


def test_durable_subscriptions_are_per_host(world: World) -> None:
    shop = world.client(host="shop", client_id="app")
    lab = world.client(host="lab", client_id="app")
    for client in (shop, lab):
        client.send_frame(
            "SUBSCRIBE", id="1", destination="/topic/t", ack="client", durable_subscription_name="d"
        )
    shop.send_frame("SEND", b"shop", destination="/topic/t")
    assert [f.body for f in shop.messages()] == [b"shop"]
    assert lab.frames() == []
