"""Virtual hosts, the pure part: selection by ``host``, and the broker's names."""

from __future__ import annotations

import pytest

from stompbroker.broker.routing.destinations import dead_letter_destination, is_dead_letter_queue
from stompbroker.broker.routing.syntax import HOST_MARKER, matches
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.broker.routing.virtual_hosts import (
    UnknownVirtualHost,
    VirtualHost,
    VirtualHosts,
    client_name,
    host_of,
    refuse_marker,
)
from stompbroker.protocol.errors import InvalidDestination

SHOP = VirtualHost("shop", aliases=("shop.example.com",))
M = HOST_MARKER


@pytest.mark.parametrize(
    ("sent", "internal"),
    [
        ("/queue/orders", f"/queue/{M}shop/orders"),
        ("/topic/prices.eur", f"/topic/{M}shop/prices.eur"),
        ("/topic/>", f"/topic/{M}shop/>"),
        ("/stream/log", f"/stream/{M}shop/log"),
        ("/queue/a,/topic/b", f"/queue/{M}shop/a,/topic/{M}shop/b"),
        ("/temp-queue/mine", "/temp-queue/mine"),
        ("/reply-queue/x-1", "/reply-queue/x-1"),
    ],
)
def test_names_map_both_ways(sent: str, internal: str) -> None:
    assert SHOP.internal(sent) == internal
    if "," not in sent:
        assert client_name(internal) == sent


def test_host_of_tells_the_virtual_host() -> None:
    assert host_of(SHOP.internal("/queue/orders")) == "shop"
    assert host_of("/queue/orders") is None
    assert client_name("/queue/orders") == "/queue/orders"


def test_durable_names_are_per_host() -> None:
    assert SHOP.durable(("c", "d")) == ("c", f"{M}shop/d")
    assert SHOP.durable(None) is None


def test_the_marker_is_refused() -> None:
    refuse_marker("/queue/orders")
    with pytest.raises(InvalidDestination, match="invalid character"):
        refuse_marker(f"/queue/{M}shop/orders")


def test_a_name_must_be_one_segment() -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        VirtualHost("a/b")


def test_unknown_hosts_go_to_the_default_host() -> None:
    hosts = VirtualHosts([SHOP])
    assert hosts.select("shop") is SHOP
    assert hosts.select("shop.example.com") is SHOP
    for header in (None, "/", "localhost", "127.0.0.1"):
        assert hosts.select(header) is None


def test_unknown_hosts_may_be_refused() -> None:
    hosts = VirtualHosts([SHOP], refuse_unknown=True)
    assert hosts.select("shop") is SHOP
    assert hosts.select("/") is None
    assert hosts.select(None) is None
    with pytest.raises(UnknownVirtualHost, match="unknown virtual host") as caught:
        hosts.select("localhost")
    assert "'localhost' names no virtual host" in caught.value.detail


def test_a_name_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="named twice"):
        VirtualHosts([SHOP, VirtualHost("other", aliases=("shop",))])


def test_dead_letter_queues_stay_in_their_host() -> None:
    origin = SHOP.internal("/queue/orders")
    target = dead_letter_destination(origin, "DLQ.")
    assert target == SHOP.internal("/queue/DLQ.orders")
    assert is_dead_letter_queue(target, "DLQ.")
    assert not is_dead_letter_queue(origin, "DLQ.")
    assert dead_letter_destination("/queue/orders", "DLQ.") == "/queue/DLQ.orders"


def test_no_wildcard_reaches_into_a_virtual_host() -> None:
    hosted = SHOP.internal("/queue/orders.eu")
    assert not matches("/queue/>", hosted)
    assert not matches("/queue/*.eu", hosted)
    assert matches(SHOP.internal("/queue/>"), hosted)
    assert matches(SHOP.internal("/queue/*.eu"), hosted)


def test_no_topic_pattern_reaches_into_a_virtual_host() -> None:
    tree: SubscriptionTree[str] = SubscriptionTree()
    tree.add("/topic/>", "default-all")
    tree.add("/topic/*.eur", "default-star")
    tree.add(SHOP.internal("/topic/>"), "shop-all")
    tree.add(SHOP.internal("/topic/prices.*"), "shop-star")
    tree.add(SHOP.internal("/topic/prices.eur"), "shop-exact")
    assert set(tree.match(SHOP.internal("/topic/prices.eur"))) == {
        "shop-all",
        "shop-star",
        "shop-exact",
    }
    assert set(tree.match("/topic/prices.eur")) == {"default-all", "default-star"}
