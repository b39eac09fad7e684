"""The pure :class:`Policies`: parsing, matching by priority, the cache and its invalidation."""

from __future__ import annotations

import pytest

from stompbroker.broker.features.policies import BadPolicy, Policies, Policy, parse_policy
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.routing.virtual_hosts import VirtualHost


def test_parse_reads_every_key_numbers_as_text_or_numbers() -> None:
    policy = parse_policy(
        "orders",
        {
            "pattern": "orders.>",
            "priority": "5",
            "apply-to": "queues",
            "max-length": 10,
            "max-length-bytes": "1000",
            "overflow": "reject-publish",
            "message-ttl": 60000,
            "expires": 1000,
            "max-redeliveries": 2,
            "redelivery-delay": 250,
            "dead-letter": "/queue/dead",
            "prefetch": 5,
        },
    )
    assert policy.priority == 5 and policy.apply_to == "queues" and policy.vhost == "/"
    assert policy.settings.max_length == 10 and policy.settings.max_length_bytes == 1000
    assert policy.as_dict()["definition"]["overflow"] == "reject-publish"
    assert policy.patterns() == ["/queue/orders.>"]


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({}, "pattern is required"),
        ({"pattern": "a", "max-lenght": 1}, "max-lenght is not a setting"),
        ({"pattern": "a", "max-length": "ten"}, "max-length takes a whole number"),
        ({"pattern": "a", "max-length": True}, "max-length takes a whole number"),
        ({"pattern": "a", "max-length": -1}, "policy p: max-length must be >= 0: -1"),
        (
            {"pattern": "a", "overflow": "explode"},
            "policy p: overflow must be one of drop-head, reject-publish, dead-letter,"
            " got 'explode'",
        ),
        ({"pattern": "a", "apply-to": "exchanges"}, "apply-to must be one of"),
        ({"pattern": "a*b"}, "a*b"),
        ({"pattern": "a", "dead-letter": "/topic/x"}, "dead-letter must be a /queue/"),
        ({"pattern": "a", "slow-consumer": "ignore"}, "slow-consumer must be one of"),
        ({"pattern": "a", "slow-consumer-buffer": 0}, "slow-consumer-buffer must be >= 1"),
        ({"pattern": "a", "vhost": "shop.example.com"}, "virtual host name 'shop.example.com'"),
    ],
)
def test_parse_refuses_a_bad_definition_naming_the_key(values: dict, said: str) -> None:
    with pytest.raises(BadPolicy, match="policy p") as caught:
        parse_policy("p", values)
    assert said in str(caught.value)
    assert "Attribute(" not in str(caught.value)


def test_a_bad_name_is_refused() -> None:
    with pytest.raises(BadPolicy, match="name"):
        parse_policy("a:b", {"pattern": "x"})


def test_the_highest_priority_of_the_matching_policies_is_in_force() -> None:
    policies = Policies()
    policies.set(parse_policy("all", {"pattern": ">", "max-length": 100}))
    policies.set(parse_policy("orders", {"pattern": "orders.*", "priority": 1, "max-length": 5}))
    assert policies.policy_for("/queue/orders.eu").name == "orders"
    assert policies.policy_for("/queue/invoices").name == "all"
    assert policies.policy_for("/topic/orders.eu").name == "orders"
    assert policies.policy_for("/temp-queue/x") is None


def test_a_policy_is_in_force_in_its_virtual_host_only() -> None:
    """
    A policy of ``shop`` matches ``shop``'s destinations by the names its clients send,
    and not the default host's or ``lab``'s; the default host's policy stays out of ``shop``.
    """
    shop, lab = VirtualHost("shop"), VirtualHost("lab")
    policies = Policies()
    policies.set(parse_policy("everywhere", {"pattern": ">", "max-length": 100}))
    policies.set(parse_policy("shop-orders", {"pattern": "orders.>", "vhost": "shop"}))
    assert policies.policy_for(shop.internal("/queue/orders.eu")).name == "shop-orders"
    assert policies.policy_for(shop.internal("/topic/orders.eu")).name == "shop-orders"
    assert policies.policy_for(shop.internal("/queue/invoices")) is None
    assert policies.policy_for(lab.internal("/queue/orders.eu")) is None
    assert policies.policy_for("/queue/orders.eu").name == "everywhere"
    policies.remove("everywhere")
    assert policies.policy_for("/queue/orders.eu") is None
    assert policies.get("shop-orders").as_dict()["vhost"] == "shop"


def test_apply_to_chooses_queues_or_topics() -> None:
    policies = Policies()
    policies.set(parse_policy("q", {"pattern": "a", "apply-to": "queues"}))
    assert policies.policy_for("/queue/a") is not None
    assert policies.policy_for("/topic/a") is None


def test_a_change_is_seen_at_once_and_told_to_the_watchers() -> None:
    told = []
    policies = Policies()
    policies.watch(lambda: told.append(len(policies.listed())))
    assert policies.settings_for("/queue/a") is None
    policies.set(parse_policy("p", {"pattern": "a", "max-length": 3}))
    assert policies.settings_for("/queue/a").max_length == 3
    policies.set(parse_policy("p", {"pattern": "a", "max-length": 4}))
    assert policies.settings_for("/queue/a").max_length == 4
    assert policies.remove("p") is True
    assert policies.remove("p") is False
    assert policies.settings_for("/queue/a") is None
    assert told == [1, 1, 0]


def test_delivery_overrides_only_what_the_policy_sets() -> None:
    defaults = DeliveryPolicy(prefetch=100, max_redeliveries=6)
    policies = Policies(defaults)
    policies.set(parse_policy("p", {"pattern": "a", "prefetch": 3, "redelivery-delay": 50}))
    found = policies.delivery("/queue/a")
    assert (found.prefetch, found.max_redeliveries, found.backoff.delay_ms) == (3, 6, 50)
    assert found.backoff.multiplier == defaults.backoff.multiplier
    assert policies.delivery("/queue/b") is defaults


def test_replace_all_makes_the_given_set_whole() -> None:
    policies = Policies()
    policies.set(parse_policy("old", {"pattern": "a"}))
    policies.replace_all([parse_policy("new", {"pattern": "b"})])
    assert [p.name for p in policies.listed()] == ["new"]
    assert policies.policy_for("/queue/a") is None


class _Recorded:
    """A PolicySharing that records what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []

    def policy_set(self, policy: Policy) -> None:
        self.told.append(("set", policy.name))

    def policy_cleared(self, name: str) -> None:
        self.told.append(("cleared", name))


def test_an_operators_changes_are_shared_and_another_nodes_are_not_told_back() -> None:
    policies = Policies(policies=(parse_policy("file", {"pattern": "a"}),))
    sharing = _Recorded()
    policies.share(sharing)
    policies.set(parse_policy("run", {"pattern": "b"}))
    policies.remove("file")
    policies.set(parse_policy("other", {"pattern": "c"}), announce=False)
    policies.remove("other", announce=False)
    assert policies.remove("missing") is False
    assert sharing.told == [("set", "run"), ("cleared", "file")]
    assert [policy.name for policy in policies.listed()] == ["run"]


def test_slow_consumer_settings_are_read() -> None:
    policy = parse_policy(
        "feeds",
        {"pattern": "feeds.>", "slow-consumer": "drop-oldest", "slow-consumer-buffer": "64"},
    )
    assert policy.settings.slow_consumer == "drop-oldest"
    assert policy.settings.slow_consumer_buffer == 64
    assert policy.as_dict()["definition"] == {
        "slow-consumer": "drop-oldest",
        "slow-consumer-buffer": 64,
    }


def test_a_connection_without_policies_has_the_listeners_slow_consumer_settings() -> None:
    assert Policies().slow_consumer(["/topic/a"], "disconnect", 100) == ("disconnect", 100)
    policies = Policies(policies=(parse_policy("q", {"pattern": "a", "slow-consumer-buffer": 5}),))
    # A queue subscription's policy does not count; nor does a topic without one.
    assert policies.slow_consumer(["/queue/a", "/topic/b"], "block", 100) == ("block", 100)
    assert policies.slow_consumer([], "block", 100) == ("block", 100)


def test_a_connection_gets_the_strictest_of_its_topic_subscriptions() -> None:
    policies = Policies(
        policies=(
            parse_policy("big", {"pattern": "big", "slow-consumer-buffer": 1000}),
            parse_policy(
                "small",
                {"pattern": "small", "slow-consumer": "drop-oldest", "slow-consumer-buffer": 10},
            ),
            parse_policy("cut", {"pattern": "cut", "slow-consumer-buffer": 10}),
            parse_policy("kind", {"pattern": "kind", "slow-consumer": "block"}),
        )
    )
    slow = policies.slow_consumer
    # A larger buffer applies when every topic subscription of the connection has it.
    assert slow(["/topic/big"], "disconnect", 100) == ("disconnect", 1000)
    # Otherwise the smallest buffer wins, with the policy that goes with it...
    assert slow(["/topic/big", "/topic/other"], "disconnect", 100) == ("disconnect", 100)
    assert slow(["/topic/big", "/topic/small"], "block", 100) == ("drop-oldest", 10)
    # ... and on equal buffers disconnect before drop-oldest before block.
    assert slow(["/topic/small", "/topic/cut"], "block", 100) == ("drop-oldest", 10)
    assert slow(["/topic/small", "/topic/cut"], "disconnect", 100) == ("disconnect", 10)
    assert slow(["/topic/kind", "/topic/other"], "drop-oldest", 100) == ("drop-oldest", 100)
    assert slow(["/topic/kind"], "drop-oldest", 100) == ("block", 100)
