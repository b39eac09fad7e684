"""
The management API with virtual hosts (:mod:`stompbroker.web.api_hosts`),
through ``StubTreq``: destinations named as their clients name them with a
``vhost`` field, ``?vhost=`` filters and maps names in, each virtual host's
own access file applies, and no internal name ever shows.
"""

from __future__ import annotations

import json
from typing import Any

from treq.testing import StubTreq
from twisted.cred import strcred
from twisted.internet.task import Clock

from stompbroker.broker.management.operations import Management
from stompbroker.broker.routing.virtual_hosts import HOST_MARKER, VirtualHost, VirtualHosts
from stompbroker.broker.service import Broker
from stompbroker.broker.store.journal import durable_key
from stompbroker.security.access_file import AccessControl, parse_policy
from stompbroker.security.portal import make_portal
from stompbroker.web.api import ManagementApi
from stompbroker.web.api_guard import ApiGuard
from stompbroker.web.api_hosts import ApiHosts
from stompbroker.web.site import web_root
from tests.support.api import ORDERS, basic, call_api
from tests.support.broker import FakeConnection

#: The broker's rules: ``clerk`` may do nothing in the default host.
BROKER_POLICY = """
[users.boss]
read = ["#"]
admin = ["#"]
write = ["#"]
"""
#: The rules of ``shop``'s own access file: ``clerk`` manages its orders.
SHOP_POLICY = """
[users.clerk]
read = ["/queue/orders"]
admin = ["/queue/orders"]
write = ["/queue/orders.*"]
"""


def _access(policy: str) -> AccessControl:
    access = AccessControl()
    access.policy = parse_policy(policy)
    return access


class HostedApi:
    """
    A broker with the virtual hosts ``shop`` (its own access file) and ``lab``,
    ``/queue/orders`` in the default host (one message) and in ``shop`` (two),
    and its API behind StubTreq.
    """

    def __init__(self, auth: bool = False) -> None:
        self.clock = Clock()
        shop_access = _access(SHOP_POLICY) if auth else None
        self.shop = VirtualHost("shop", access=shop_access)
        hosts = VirtualHosts([self.shop, VirtualHost("lab")])
        self.broker = Broker(self.clock, virtual_hosts=hosts)
        self.broker.publish("/queue/orders", "default")
        for body in ("shop-1", "shop-2"):
            self.broker.publish(self.shop.internal("/queue/orders"), body)
        portal = access = None
        if auth:
            checkers = [strcred.makeChecker("memory:boss:secret:clerk:secret")]
            portal = make_portal(checkers)
            access = _access(BROKER_POLICY)
        api = ManagementApi(Management(self.broker), ApiGuard(portal, access, self.clock))
        self.treq = StubTreq(web_root(self.broker, api=api))

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, str]:
        """:returns: the status, the JSON answer and its raw text."""
        code, content, _ = call_api(self.treq, self.clock, method, path, body, headers)
        text = content.decode()
        # json.dumps writes the marker as an escape: neither shows.
        assert "\\u001d" not in text.lower() and HOST_MARKER not in text
        return code, json.loads(text), text

    def bodies(self, internal: str) -> list[bytes]:
        return [message.body for message in self.broker.engine.queues[internal].pending]


def test_the_list_names_destinations_as_clients_do_with_their_vhost() -> None:
    """The same queue name in two hosts is two rows, each with its vhost; ?vhost= filters."""
    api = HostedApi()
    code, rows, _ = api.call("GET", "destinations")
    assert code == 200
    assert sorted((row["vhost"], row["destination"], row["depth"]) for row in rows) == [
        ("/", "/queue/orders", 1),
        ("shop", "/queue/orders", 2),
    ]
    _, shop_rows, _ = api.call("GET", "destinations?vhost=shop")
    assert [(row["vhost"], row["depth"]) for row in shop_rows] == [("shop", 2)]
    _, default_rows, _ = api.call("GET", "destinations?vhost=%2F")
    assert [(row["vhost"], row["depth"]) for row in default_rows] == [("/", 1)]
    _, lab_rows, _ = api.call("GET", "destinations?vhost=lab")
    assert lab_rows == []


def test_an_unknown_vhost_is_a_404_naming_the_hosts_served() -> None:
    api = HostedApi()
    for path in ("destinations?vhost=nope", f"destinations/{ORDERS}/messages?vhost=nope"):
        code, error, _ = api.call("GET", path)
        assert code == 404
        assert error["error"] == "unknown virtual host"
        assert "/, lab, shop" in error["detail"]


def test_browse_purge_and_detail_act_on_the_named_vhost_only() -> None:
    api = HostedApi()
    code, messages, _ = api.call("GET", f"destinations/{ORDERS}/messages?vhost=shop")
    assert code == 200
    assert [(m["destination"], m["body"]) for m in messages] == [
        ("/queue/orders", "shop-1"),
        ("/queue/orders", "shop-2"),
    ]
    code, detail, _ = api.call("GET", f"destinations/{ORDERS}?vhost=shop")
    assert (detail["destination"], detail["vhost"], detail["depth"]) == ("/queue/orders", "shop", 2)
    code, purged, _ = api.call("DELETE", f"destinations/{ORDERS}/messages?vhost=shop")
    assert code == 200
    assert (purged["destination"], purged["vhost"], purged["purged"]) == (
        "/queue/orders",
        "shop",
        2,
    )
    assert api.bodies(api.shop.internal("/queue/orders")) == []
    assert api.bodies("/queue/orders") == [b"default"]


def test_move_and_publish_stay_in_the_vhost() -> None:
    """A move's "to" and a publish name destinations of the same virtual host."""
    api = HostedApi()
    code, moved, _ = api.call(
        "POST", f"destinations/{ORDERS}/move?vhost=shop", {"to": "/queue/orders.old", "count": 1}
    )
    assert code == 200 and (moved["to"], moved["vhost"], moved["moved"]) == (
        "/queue/orders.old",
        "shop",
        1,
    )
    assert api.bodies(api.shop.internal("/queue/orders.old")) == [b"shop-1"]
    assert "/queue/orders.old" not in api.broker.engine.queues
    code, published, _ = api.call(
        "POST", "destinations/%2Fqueue%2Fnew/publish?vhost=lab", {"body": "hi"}
    )
    assert code == 200 and published["vhost"] == "lab"
    assert api.bodies(VirtualHost("lab").internal("/queue/new")) == [b"hi"]


def test_a_name_holding_the_marker_is_refused() -> None:
    """Names go in as clients name them: an internal name is a 400, and reaches nothing."""
    api = HostedApi()
    internal = api.shop.internal("/queue/orders").replace("/", "%2F").replace(HOST_MARKER, "%1D")
    code, error, _ = api.call("DELETE", f"destinations/{internal}/messages")
    assert code == 400 and "?vhost=" in error["detail"]
    assert len(api.bodies(api.shop.internal("/queue/orders"))) == 2


def test_connections_show_their_vhost_and_filter_by_it() -> None:
    api = HostedApi()
    shop_client, default_client = FakeConnection("in-shop"), FakeConnection("in-default")
    # As sessions do: open at connectionMade, then CONNECT selects the host.
    for connection, header in ((shop_client, "shop"), (default_client, "localhost")):
        api.broker.open_connection(connection)
        api.broker.select_host(connection, header)
    _, rows, _ = api.call("GET", "connections")
    assert sorted((row["id"], row["vhost"]) for row in rows) == [
        ("in-default", "/"),
        ("in-shop", "shop"),
    ]
    _, rows, _ = api.call("GET", "connections?vhost=shop")
    assert [row["id"] for row in rows] == ["in-shop"]
    api.broker.close_connection(shop_client)
    assert api.broker.host_name(shop_client) is None


def test_a_vhost_access_file_gives_the_rights_in_that_host() -> None:
    """clerk manages shop's orders (shop's file) and nothing in the default host (the broker's)."""
    api = HostedApi(auth=True)
    clerk = basic("clerk")
    _, rows, _ = api.call("GET", "destinations", headers=clerk)
    assert [(row["vhost"], row["destination"]) for row in rows] == [("shop", "/queue/orders")]
    code, error, _ = api.call("DELETE", f"destinations/{ORDERS}/messages", headers=clerk)
    assert code == 403 and "virtual host '/'" in error["detail"]
    assert api.bodies("/queue/orders") == [b"default"]
    code, error, _ = api.call(
        "POST",
        f"destinations/{ORDERS}/move?vhost=shop",
        {"to": "/queue/elsewhere"},
        headers=clerk,
    )
    assert code == 403 and "'/queue/elsewhere' in virtual host 'shop'" in error["detail"]
    code, _, _ = api.call("DELETE", f"destinations/{ORDERS}/messages?vhost=shop", headers=clerk)
    assert code == 200
    # The broker's file gives nothing in shop, which has its own: boss sees only the default host.
    _, rows, _ = api.call("GET", "destinations", headers=basic("boss"))
    assert [row["vhost"] for row in rows] == ["/"]


def test_durable_keys_map_on_their_name() -> None:
    hosts = ApiHosts(VirtualHosts([VirtualHost("shop")]))
    shop = hosts.named("shop")
    key = durable_key(("client", "audit"))
    internal = hosts.inward(shop, key)
    assert internal == durable_key(("client", f"{HOST_MARKER}shop/audit"))
    assert hosts.outward(internal) == ("shop", key)
    assert hosts.outward(key) == ("/", key)
    assert hosts.inward(None, key) == key


def test_without_vhosts_only_the_default_host_is_named() -> None:
    hosts = ApiHosts(None)
    assert hosts.named(None) is None and hosts.named("/") is None
    assert hosts.outward("/queue/a") == ("/", "/queue/a")
    assert not hosts.configured


def test_policies_belong_to_a_vhost_and_are_in_force_there_only() -> None:
    """
    ``PUT /api/policies/NAME?vhost=shop`` sets a policy of ``shop``: the list filters by
    ``?vhost=``, and the policy shows on ``shop``'s ``/queue/orders`` only.
    """
    api = HostedApi()
    code, policy, _ = api.call(
        "PUT", "policies/short?vhost=shop", {"pattern": "orders", "definition": {"max-length": 5}}
    )
    assert (code, policy["vhost"]) == (200, "shop")
    code, _, _ = api.call("PUT", "policies/everywhere", {"pattern": ">"})
    assert code == 200
    _, listed, _ = api.call("GET", "policies?vhost=shop")
    assert [(p["name"], p["vhost"]) for p in listed] == [("short", "shop")]
    _, listed, _ = api.call("GET", "policies")
    assert sorted((p["name"], p["vhost"]) for p in listed) == [
        ("everywhere", "/"),
        ("short", "shop"),
    ]
    _, rows, _ = api.call("GET", "destinations")
    assert sorted((row["vhost"], row["policy"]) for row in rows) == [
        ("/", "everywhere"),
        ("shop", "short"),
    ]
    code, _, _ = api.call("GET", "policies/short?vhost=lab")
    assert code == 404
    code, cleared, _ = api.call("DELETE", "policies/short?vhost=shop")
    assert code == 200 and cleared["cleared"]


def test_a_policys_vhost_must_be_served_and_agree_with_the_query() -> None:
    api = HostedApi()
    code, error, _ = api.call("PUT", "policies/p", {"pattern": "a", "vhost": "nowhere"})
    assert code == 400 and "'nowhere' is no virtual host" in error["detail"]
    code, error, _ = api.call("PUT", "policies/p?vhost=lab", {"pattern": "a", "vhost": "shop"})
    assert code == 400 and "'shop' is not ?vhost='s 'lab'" in error["detail"]
    code, error, _ = api.call("GET", "policies?vhost=nowhere")
    assert code == 404
    assert api.call("GET", "policies")[1] == []


def test_the_virtual_hosts_are_listed_with_what_each_holds() -> None:
    """/api/vhosts: the default host first, then each host, with its connections and queues."""
    api = HostedApi()
    shop_client = FakeConnection("c-shop")
    api.broker.open_connection(shop_client)
    api.broker.select_host(shop_client, "shop")
    code, hosts, _ = api.call("GET", "vhosts")
    assert code == 200
    assert [
        (host["name"], host["connections"], host["destinations"], host["messages"])
        for host in hosts
    ] == [("/", 0, 1, 1), ("shop", 1, 1, 2), ("lab", 0, 0, 0)]


def test_a_hosts_destinations_page_and_sort_on_the_names_its_clients_know() -> None:
    """?vhost= with paging: the shop's rows only; the sort and filter use the names shown."""
    api = HostedApi()
    api.broker.publish(api.shop.internal("/queue/archive"), "old")
    code, answer, _ = api.call("GET", "destinations?vhost=shop&page=1&sort=destination")
    assert code == 200
    assert [row["destination"] for row in answer["items"]] == ["/queue/archive", "/queue/orders"]
    assert answer["total_count"] == 2
    _, answer, _ = api.call("GET", "destinations?page=1&name=orders&sort=vhost&sort_reverse=true")
    assert [(row["vhost"], row["destination"]) for row in answer["items"]] == [
        ("shop", "/queue/orders"),
        ("/", "/queue/orders"),
    ]
