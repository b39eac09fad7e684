"""A node's figures as it shares them (stompbroker.broker.engine.node_figures): pure."""

from __future__ import annotations

import pytest

from stompbroker.broker.engine.node_figures import (
    ClusterView,
    DestinationFigures,
    NodeFigures,
    StreamRange,
)
from stompbroker.broker.engine.redis.figures_exchange import stream_range
from stompbroker.broker.engine.redis.streams import offset_of
from stompbroker.broker.flow.counter_names import FLOW_COUNTERS

#: A destination's flow counters on a node: one of each.
TOTALS = tuple(range(1, len(FLOW_COUNTERS) + 1))


def test_figures_survive_encoding() -> None:
    """What a node encodes, another decodes to the same figures."""
    figures = NodeFigures(
        "n1", 1.5, 2.0, 3, 4, 1, 1000, {"/queue/q": DestinationFigures(TOTALS, 3, 4, 5)}
    )
    assert NodeFigures.decode(figures.encode()) == figures
    counted = NodeFigures("n1", 1.5, 2.0, 3, 4, 1, 1000, {}, foreign_acks=7)
    assert NodeFigures.decode(counted.encode()) == counted


def test_figures_of_a_node_that_counts_no_foreign_acks_read_as_zero() -> None:
    """A node of an older version sends eight fields: its foreign_acks read as 0."""
    figures = NodeFigures.decode(b'["n1", 1.5, 2.0, 3, 4, 1, 1000, {}]')
    assert (figures.node, figures.rss_bytes, figures.foreign_acks) == ("n1", 1000, 0)


def test_counters_a_node_of_an_older_version_does_not_count_read_as_zero() -> None:
    """Its destinations carry fewer flow counters (no messages_duplicate): the rest are 0."""
    older = list(TOTALS[: FLOW_COUNTERS.index("messages_duplicate")])
    payload = b'["n1", 1.5, 2.0, 3, 4, 1, 1000, {"/queue/q": [%s, 3, 4, 5]}]' % str(older).encode()
    [figures] = NodeFigures.decode(payload).destinations.values()
    assert figures.totals == (*older, 0)


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[]",
        b'["n", 1, 2, 3, 4, 5, 6, 7]',
        b'["n", 1, 2, 3, 4, 5, 6, {}, 0, 9]',
        b'["n", 1, 2, 3, 4, 5, 6, {}, "many"]',
        b"{}",
    ],
)
def test_anything_else_is_refused(payload: bytes) -> None:
    """Bytes that are not a node's figures raise ValueError (the reader skips them)."""
    with pytest.raises(ValueError):
        NodeFigures.decode(payload)


def test_the_view_adds_the_other_nodes() -> None:
    """The view's depth, in-flight and consumers of a destination are the other nodes' sums."""
    peers = tuple(
        NodeFigures(name, 0.0, 0.0, 0, 0, 0, 0, {"/queue/q": DestinationFigures((0,), 1, 2, 3)})
        for name in ("b", "c")
    )
    view = ClusterView(peers)
    assert (view.depth("/queue/q"), view.in_flight("/queue/q"), view.consumers("/queue/q")) == (
        2,
        4,
        6,
    )
    assert view.depth("/queue/other") == 0


def test_a_redis_streams_range_is_read_from_its_first_and_last_entry() -> None:
    """XINFO STREAM's entries' ids become offsets; an emptied stream starts after its last id."""
    info = {
        "length": 3,
        "first-entry": (b"1700000000000-0", {b"m": b"x"}),
        "last-entry": (b"1700000000005-1", {b"m": b"y"}),
        "last-generated-id": b"1700000000005-1",
    }
    assert stream_range(info, b"120") == StreamRange(
        offset_of("1700000000000-0"), offset_of("1700000000005-1"), 3, 120
    )
    emptied = {"length": 0, "first-entry": None, "last-entry": None, "last-generated-id": b"9-2"}
    assert stream_range(emptied, None) == StreamRange(offset_of("9-2") + 1, None, 0, 0)
