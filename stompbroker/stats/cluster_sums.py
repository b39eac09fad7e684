"""
The whole cluster's statistics, from this node's snapshot and the other nodes'
figures (:class:`~stompbroker.broker.engine.node_figures.ClusterView`, which an engine
shared by several nodes reads about once a second).

:class:`ClusterSums` adds them up: a destination's flow counters are the sum
over the live nodes, its in-flight and consumers too, and its depth is what the
nodes hold waiting plus what waits in the engine's server unread (a queue's, or
a durable subscription's under its pattern).  So every surface made from a
:class:`~stompbroker.stats.model.Snapshot` (``/stats``, ``/metrics``, the live
topic and the dashboard, the export) shows the cluster as if it were one broker,
and :attr:`~stompbroker.stats.model.Snapshot.nodes` each node.

Counters must not go down, or the samplers would take it for a reset: what a
node counted stays in the sums after the node has gone (or has forgotten an idle
destination), for as long as some live node still knows the destination.

Nothing here knows an engine: an engine of one process has no view, and the
snapshot is this node's alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stompbroker.broker.engine.node_figures import ClusterView, DestinationFigures, NodeFigures
from stompbroker.stats.schema import FLOW_COUNTERS

__all__ = ["ClusterSums", "nodes_document"]

_DURABLE = "durable:"
_NO_TRAFFIC = (0,) * len(FLOW_COUNTERS)
_MESSAGES_IN = FLOW_COUNTERS.index("messages_in")
_MESSAGES_DELIVERED = FLOW_COUNTERS.index("messages_delivered")


def nodes_document(nodes: tuple[NodeFigures, ...]) -> list[dict[str, Any]]:
    """
    :param nodes: every node's figures, this one's first.
    :returns: the ``nodes`` list of ``/stats``: each node's own figures.
    """
    return [
        {
            "node": figures.node,
            "here": index == 0,
            "uptime_s": figures.uptime_s,
            "connections": figures.connections,
            "connections_opened": figures.connections_opened,
            "connections_closed": figures.connections_closed,
            "rss_bytes": figures.rss_bytes,
            "messages_in": figures.total(_MESSAGES_IN),
            "messages_delivered": figures.total(_MESSAGES_DELIVERED),
            "foreign_acks": figures.foreign_acks,
        }
        for index, figures in enumerate(nodes)
    ]


def _add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x + y for x, y in zip(a, b, strict=True))


class ClusterSums:
    """
    Adds the other nodes' figures to this node's snapshot, keeping counters from
    going down when a node leaves.
    """

    def __init__(self) -> None:
        #: The figures of each node at the previous merge.
        self._last: dict[str, NodeFigures] = {}
        #: destination -> totals counted by nodes, or node destinations, gone since.
        self._departed: dict[str, tuple[int, ...]] = {}
        #: connections opened and closed on nodes gone since.
        self._departed_connections = (0, 0)

    def forgotten(self, destination: str, totals: tuple[int, ...]) -> None:
        """This node forgot an idle destination: keep its totals in the sums."""
        self._keep(destination, totals)

    def _keep(self, destination: str, totals: tuple[int, ...]) -> None:
        before = self._departed.get(destination)
        self._departed[destination] = totals if before is None else _add(before, totals)

    def merge(
        self, here: NodeFigures, view: ClusterView
    ) -> tuple[NodeFigures, tuple[NodeFigures, ...]]:
        """
        :param here: this node's figures now.
        :param view: the engine's latest view of the other nodes.
        :returns: the cluster's figures, as if it were one node (named as this
            one), and every node's, this one first.
        """
        peers = {figures.node: figures for figures in view.peers}
        for name, last in self._last.items():
            current = peers.get(name)
            if current is None:
                opened, closed = self._departed_connections
                self._departed_connections = (
                    opened + last.connections_opened,
                    closed + last.connections_closed,
                )
            for destination, figures in last.destinations.items():
                if current is None or destination not in current.destinations:
                    self._keep(destination, figures.totals)
        self._last = dict(peers)
        everyone = (here, *peers.values())
        unread = _unread_by_name(view.unread, view.patterns)
        live = {name for figures in everyone for name in figures.destinations} | set(unread)
        for name in [name for name in self._departed if name not in live]:
            del self._departed[name]
        destinations: dict[str, DestinationFigures] = {}
        for name in sorted(live):
            parts = [f for figures in everyone if (f := figures.destinations.get(name))]
            totals = self._departed.get(name, _NO_TRAFFIC)
            for part in parts:
                totals = _add(totals, part.totals)
            destinations[name] = DestinationFigures(
                totals,
                sum(part.depth for part in parts) + unread.get(name, 0),
                sum(part.in_flight for part in parts),
                sum(part.consumers for part in parts),
            )
        opened, closed = self._departed_connections
        cluster = NodeFigures(
            here.node,
            here.seconds,
            here.uptime_s,
            sum(figures.connections for figures in everyone),
            opened + sum(figures.connections_opened for figures in everyone),
            closed + sum(figures.connections_closed for figures in everyone),
            sum(figures.rss_bytes for figures in everyone),
            destinations,
        )
        return cluster, everyone


def _unread_by_name(unread: Mapping[str, int], patterns: Mapping[str, str]) -> dict[str, int]:
    """:returns: ``unread`` with each durable subscription's counted under its pattern."""
    found: dict[str, int] = {}
    for name, count in unread.items():
        if name.startswith(_DURABLE):
            pattern = patterns.get(name)
            if pattern is None:
                continue
            name = pattern
        found[name] = found.get(name, 0) + count
    return found
