"""The cluster's sums (stompbroker.stats.cluster_sums): pure, no engine, no reactor."""

from __future__ import annotations

from stompbroker.broker.engine.node_figures import ClusterView, DestinationFigures, NodeFigures
from stompbroker.stats.cluster_sums import ClusterSums, nodes_document
from stompbroker.stats.schema import FLOW_COUNTERS

IN = FLOW_COUNTERS.index("messages_in")


def totals(messages_in: int) -> tuple[int, ...]:
    counts = [0] * len(FLOW_COUNTERS)
    counts[IN] = messages_in
    return tuple(counts)


def node(name: str, destinations: dict[str, DestinationFigures], opened: int = 1) -> NodeFigures:
    return NodeFigures(name, 100.0, 10.0, 1, opened, 0, 1000, destinations)


def test_destinations_add_up_over_nodes_with_what_waits_unread() -> None:
    """Counters, in-flight and consumers add up; depth adds what the server holds unread."""
    here = node("a", {"/queue/q": DestinationFigures(totals(5), 1, 2, 1)})
    peer = node("b", {"/queue/q": DestinationFigures(totals(7), 3, 4, 2)})
    cluster, nodes = ClusterSums().merge(here, ClusterView((peer,), {"/queue/q": 10}))
    state = cluster.destinations["/queue/q"]
    assert (state.totals[IN], state.depth, state.in_flight, state.consumers) == (12, 14, 6, 3)
    assert cluster.connections == 2
    assert [figures.node for figures in nodes] == ["a", "b"]


def test_a_durable_subscription_waits_under_its_pattern() -> None:
    """What a durable subscription's stream holds unread counts under its topic pattern."""
    here = node("a", {})
    view = ClusterView(
        (), {'durable:["c","n"]': 4, 'durable:["x","y"]': 9}, {'durable:["c","n"]': "/topic/t.*"}
    )
    cluster, _ = ClusterSums().merge(here, view)
    assert cluster.destinations["/topic/t.*"].depth == 4
    assert list(cluster.destinations) == ["/topic/t.*"]


def test_counters_stay_when_a_node_leaves_while_others_know_the_destination() -> None:
    """A node gone keeps its counts in the sums, so that counters never go down."""
    sums = ClusterSums()
    here = node("a", {"/topic/t": DestinationFigures(totals(1))})
    peer = node("b", {"/topic/t": DestinationFigures(totals(5))}, opened=3)
    first, _ = sums.merge(here, ClusterView((peer,)))
    later, nodes = sums.merge(here, ClusterView(()))
    assert (
        first.destinations["/topic/t"].totals[IN] == later.destinations["/topic/t"].totals[IN] == 6
    )
    assert later.connections_opened == first.connections_opened == 4
    assert len(nodes) == 1


def test_a_destination_no_live_node_knows_is_dropped() -> None:
    """Once no live node knows a destination, it leaves the sums (as a forgotten one does)."""
    sums = ClusterSums()
    here = node("a", {})
    peer = node("b", {"/queue/r": DestinationFigures(totals(2))})
    sums.merge(here, ClusterView((peer,)))
    cluster, _ = sums.merge(here, ClusterView(()))
    assert "/queue/r" not in cluster.destinations


def test_nodes_document_marks_this_node() -> None:
    """The nodes list of /stats names each node, this one first and marked here."""
    here = node("a", {"/queue/q": DestinationFigures(totals(3))})
    listed = nodes_document((here, node("b", {})))
    assert [(entry["node"], entry["here"], entry["messages_in"]) for entry in listed] == [
        ("a", True, 3),
        ("b", False, 0),
    ]


def test_nodes_document_gives_each_nodes_foreign_acks() -> None:
    """Each node's dropped acknowledgements are its own, not summed into the cluster's."""
    here = node("a", {})
    peer = NodeFigures("b", 100.0, 10.0, 1, 1, 0, 1000, {}, foreign_acks=4)
    _, nodes = ClusterSums().merge(here, ClusterView((peer,)))
    assert [entry["foreign_acks"] for entry in nodes_document(nodes)] == [0, 4]
