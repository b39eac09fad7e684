"""The pure parts of deciding who gets a shared queue's message: the roster and the candidates."""

from __future__ import annotations

import json

import pytest

from stompbroker.broker.engine.redis.cluster_dispatch import (
    candidate_consumers,
    candidate_nodes,
    local_options,
)
from stompbroker.broker.engine.redis.consumer_registry import Registered, Roster, parse_entry
from stompbroker.broker.features.selectors import compile_selector
from stompbroker.broker.queueing.consumer_choice import ConsumerOptions


def consumer(
    node: str,
    order: int,
    *,
    priority: int = 0,
    exclusive: bool = False,
    selector: str = "",
    window: int = 1,
) -> Registered:
    compiled = compile_selector(selector) if selector else None
    return Registered(f"{node}/{order}", node, compiled, priority, exclusive, order, window)


def test_a_registry_entry_reads_back_with_its_selector_compiled() -> None:
    """What the REGISTER script writes is what the roster reads (docs/cluster.md keys)."""
    value = json.dumps(["n1", "color = 'red'", 5, 1, 7, 10])
    entry = parse_entry("n1/3", value)
    assert (entry.node, entry.priority, entry.exclusive, entry.order, entry.window) == (
        "n1",
        5,
        True,
        7,
        10,
    )
    assert entry.selector is not None and entry.selector.matches({"color": "red"})


def test_the_roster_keeps_only_the_live_nodes_consumers() -> None:
    """A dead node's consumers take nothing, even before its entries are forgotten."""
    entries = {
        b"a/1": json.dumps(["a", None, 0, 0, 1, 1]),
        b"b/1": json.dumps(["b", None, 0, 0, 2, 1]),
    }
    roster = Roster.read(entries, ["a"], single_active=False)
    assert [c.node for c in roster.consumers] == ["a"]
    assert not roster.needs_features


def test_the_active_consumer_is_the_highest_priority_earliest_candidate() -> None:
    """As on one node (consumer_choice): priority first, then the earliest to subscribe."""
    early = consumer("a", 1, exclusive=True)
    late = consumer("b", 2, exclusive=True)
    high = consumer("c", 3, exclusive=True, priority=5)
    assert Roster([late, early]).active == early
    assert Roster([early, late, high]).active == high
    assert Roster([consumer("a", 1), consumer("b", 2)], single_active=True).active is not None


def test_while_exclusive_only_the_active_consumer_takes() -> None:
    """The standby consumers get nothing while the active one is there."""
    active, standby = consumer("a", 1, exclusive=True), consumer("b", 2, exclusive=True)
    assert Roster([active, standby]).takers(None) == [active]


def test_takers_are_those_whose_selector_selects_highest_priority_first() -> None:
    """Selectors filter; the best priority comes first."""
    red = consumer("a", 1, selector="color = 'red'")
    anything = consumer("b", 2)
    high = consumer("c", 3, priority=9)
    roster = Roster([red, anything, high])
    assert roster.takers({"color": "blue"}) == [high, anything]
    assert roster.takers({"color": "red"}) == [high, red, anything]


@pytest.mark.parametrize(
    ("room_here", "expected"),
    [(True, ["here", 1, "b", 4]), (False, ["b", 4])],
)
def test_this_node_leads_the_candidates_only_with_room(
    room_here: bool, expected: list[object]
) -> None:
    """A node with room keeps what its consumers may take; without, it is not a candidate."""
    takers = [consumer("here", 1), consumer("b", 2, window=3), consumer("b", 3)]
    assert candidate_nodes(takers, "here", room_here) == expected


def test_a_higher_priority_node_comes_before_this_one() -> None:
    """This node leads only when it has a consumer of the best priority among the takers."""
    takers = [consumer("b", 2, priority=5), consumer("here", 1)]
    assert candidate_nodes(takers, "here", True) == ["b", 1, "here", 1]


def test_a_groups_candidates_go_to_the_script_best_first_with_their_order() -> None:
    """candidate_consumers: field, node, priority, order of each taker, as MOVE picks from."""
    takers = Roster([consumer("a", 1), consumer("b", 2, priority=5)]).takers(None)
    assert candidate_consumers(takers) == ["b/2", "b", 5, 2, "a/1", "a", 0, 1]


@pytest.mark.parametrize(
    "options, local",
    [
        (None, None),
        (ConsumerOptions(single_active=True), None),
        (ConsumerOptions(single_active=False), None),
        (ConsumerOptions(priority=3, single_active=True), ConsumerOptions(priority=3)),
        (ConsumerOptions(exclusive=True), ConsumerOptions(exclusive=True)),
    ],
)
def test_a_local_queue_never_declares_single_active_itself(
    options: ConsumerOptions | None, local: ConsumerOptions | None
) -> None:
    """The shared declaration decides; the node's local queue gets the rest of the options."""
    assert local_options(options) == local
