"""
Tests of the engines' one capabilities value: what each engine states, the
refusal texts, and that the broker refuses a feature exactly when the engine's
value lacks it (so that turning a field on is what gives the feature).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from attrs import evolve, fields
from twisted.internet.task import Clock

from stompbroker.broker.engine.capabilities import LOCAL, REDIS, REFUSALS, Capabilities, require
from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.service import Broker
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.protocol.errors import NotSupported
from tests.support.broker import FakeConnection, Inbox

EPOCH = 1_700_000_000.0


def test_the_local_engine_supports_everything_and_persists_with_a_store() -> None:
    """Without a store the local engine lacks persistence only."""
    assert LocalEngine(Clock(), store=MemoryStore()).capabilities() == LOCAL
    assert LocalEngine(Clock()).capabilities() == evolve(LOCAL, persistence=False)
    assert all(getattr(LOCAL, field.name) for field in fields(Capabilities))


def test_the_redis_engine_lacks_what_docs_cluster_md_lists() -> None:
    """The fields the redis engine lacks: the cluster issues turn them on one by one."""
    lacking = {field.name for field in fields(Capabilities) if not getattr(REDIS, field.name)}
    assert lacking == {
        "queue_wildcards",
    }


@pytest.mark.parametrize(
    ("feature", "text"),
    [
        ("scheduling", "scheduled delivery is not supported by this engine"),
        ("retain", "retain is not supported by this engine"),
        ("browse", "queue browsers are not supported by the redis engine yet"),
        (
            "exclusive_consumers",
            "consumer priorities and exclusive consumers are not supported by the redis engine yet",
        ),
        (
            "consumer_priority",
            "consumer priorities and exclusive consumers are not supported by the redis engine yet",
        ),
        ("queue_wildcards", "wildcard queue consumers are not supported by the redis engine yet"),
    ],
)
def test_require_refuses_what_is_lacking_with_the_documented_text(feature: str, text: str) -> None:
    """Each refusal keeps the text clients got before the capabilities value."""
    with pytest.raises(NotSupported) as raised:
        require(evolve(LOCAL, **{feature: False}), feature)
    assert raised.value.message == text
    require(LOCAL, feature)


def test_require_knows_only_refusable_capabilities() -> None:
    """A name with no refusal (a typo, or a capability never refused) is a KeyError."""
    with pytest.raises(KeyError):
        require(LOCAL, "persistence")
    assert "priority_order" not in REFUSALS


def broker_stating(capabilities: Capabilities) -> tuple[Broker, FakeConnection]:
    """A broker on a local engine (with a store) that states ``capabilities``."""
    clock = Clock()
    clock.advance(EPOCH)
    engine = LocalEngine(clock, store=MemoryStore())
    engine.open()
    engine._capabilities = capabilities
    broker = Broker(clock, engine=engine)
    connection = FakeConnection()
    broker.open_connection(connection)
    return broker, connection


def subscribe(destination: str, ack: str, **headers: str) -> Callable[[Broker, Any], Any]:
    def act(broker: Broker, connection: Any) -> Any:
        inbox = Inbox(destination, ack, connection=connection, headers=headers)
        return broker.subscribe(inbox)

    return act


def send(destination: str, **headers: str) -> Callable[[Broker, Any], Any]:
    def act(broker: Broker, connection: Any) -> Any:
        return broker.send(destination, tuple(headers.items()), b"x", connection=connection)

    return act


ACTIONS = {
    "selectors_on_queues": subscribe("/queue/q", "client", selector="n = 1"),
    "message_groups": send("/queue/q", JMSXGroupID="g"),
    "scheduling": send("/queue/q", AMQ_SCHEDULED_DELAY="1000"),
    "retain": send("/topic/t", retain="set"),
    "browse": subscribe("/queue/q", "auto", browser="true"),
    "exclusive_consumers": subscribe("/queue/q", "client", **{"activemq.exclusive": "true"}),
    "consumer_priority": subscribe("/queue/q", "client", **{"activemq.priority": "5"}),
    "queue_wildcards": subscribe("/queue/q.>", "client"),
}


@pytest.mark.parametrize("feature", sorted(ACTIONS))
def test_the_broker_refuses_a_feature_exactly_when_the_engine_lacks_it(feature: str) -> None:
    """The same frame is refused with the field off and served with it on."""
    broker, connection = broker_stating(evolve(LOCAL, **{feature: False}))
    with pytest.raises(NotSupported) as raised:
        ACTIONS[feature](broker, connection)
    assert (raised.value.message, raised.value.detail) == REFUSALS[feature]
    broker, connection = broker_stating(LOCAL)
    ACTIONS[feature](broker, connection)


def test_the_refusals_cover_every_action() -> None:
    """Every refusable capability has a frame above that it refuses."""
    assert set(ACTIONS) == set(REFUSALS)
