"""
Every node's consumers of a shared queue, registered in Redis, so that whichever
node reads a message can tell which consumer, on which node, should get it.

- ``PREFIX:{q:/queue/NAME}:consumers``: a hash, ``NODE/N`` (the node's N-th registered
  consumer, counted over the node's life, so a field is never reused) ->
  ``[node, selector, priority, exclusive, order, window]``, where ``order``
  is the registration's rank in the queue (a counter in the mode hash), so
  that "earliest among equals" means the same on every node.
- ``PREFIX:{q:/queue/NAME}:mode`` (the mode hash, :mod:`.lanes`): ``v``, a version
  bumped by every change of the registry; ``s``, the order counter; ``sa``,
  ``1`` while the queue is declared ``x-single-active-consumer``: one
  declaration for every node, made as one node makes it (the SUBSCRIBE that
  finds the queue without consumers anywhere declares it with ``true``; it
  stands while the queue holds messages, and a queue that holds nothing is
  declared again by its next first consumer); each node's local queue takes the
  declaration from here, never from its own first SUBSCRIBE.

A node registers a consumer when it subscribes and removes it when it leaves,
each one script through its ordered writer; the entries of a node that dies are
removed by the first node that sees its liveness key gone
(:data:`FORGET_NODE`).  :class:`Roster` is the pure part: the registry as read,
and who the exclusive (active) consumer is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from attrs import evolve, frozen

from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.features.selectors import Selector, compile_selector
from stompbroker.broker.queueing.consumer_choice import ConsumerOptions

__all__ = [
    "FORGET_NODE",
    "REGISTER",
    "UNREGISTER",
    "Registered",
    "Roster",
    "candidate_consumers",
    "candidate_nodes",
    "local_options",
]

#: lua/register_consumer.lua (what it takes and answers is said there).
REGISTER = load("register_consumer")

#: lua/unregister_consumer.lua (what it takes and answers is said there).
UNREGISTER = load("unregister_consumer")


#: lua/forget_node_consumers.lua (what it takes and answers is said there).
FORGET_NODE = load("forget_node_consumers")


def local_options(options: ConsumerOptions | None) -> ConsumerOptions | None:
    """
    :returns: a consumer's options for its node's local queue: without
        ``x-single-active-consumer``, which is the queue's shared declaration
        (:meth:`.ClusterDispatch.refresh` gives it to the local queue), or ``None``
        when nothing else is left.
    """
    if options is None or options.single_active is None:
        return options
    stripped = evolve(options, single_active=None)
    return None if stripped.is_plain else stripped


@frozen
class Registered:
    """
    One consumer of a shared queue, on some node, as registered.

    :ivar field: its field in the registry (``NODE/N``).
    :ivar node: the node it is connected to.
    :ivar selector: its compiled selector, or ``None``.
    :ivar priority: its consumer priority.
    :ivar exclusive: whether it asked to be exclusive.
    :ivar order: its rank of registration in the queue.
    :ivar window: how many messages it may hold unacknowledged.
    """

    field: str
    node: str
    selector: Selector | None
    priority: int
    exclusive: bool
    order: int
    window: int = 1

    @property
    def is_plain(self) -> bool:
        """Whether it asks for nothing a plain round-robin consumer lacks."""
        return self.selector is None and self.priority == 0 and not self.exclusive


def parse_entry(field: str, value: str | bytes) -> Registered:
    """
    :returns: a registry entry as a :class:`Registered`.
    :raises ValueError: for a value :data:`REGISTER` did not write.
    """
    node, selector, priority, exclusive, order, window = json.loads(value)
    return Registered(
        field,
        node,
        None if selector is None else compile_selector(selector),
        int(priority),
        bool(exclusive),
        int(order),
        int(window),
    )


class Roster:
    """
    A queue's registered consumers on the live nodes, as one read of the registry saw them.

    :param consumers: the entries of the live nodes.
    :param single_active: the queue is declared ``x-single-active-consumer``.
    """

    __slots__ = ("consumers", "single_active", "active")

    def __init__(self, consumers: Iterable[Registered], single_active: bool = False) -> None:
        self.consumers = sorted(consumers, key=lambda consumer: consumer.order)
        self.single_active = single_active
        #: The consumer that gets every message while the queue is exclusive, else ``None``.
        self.active: Registered | None = None
        if single_active or any(consumer.exclusive for consumer in self.consumers):
            candidates = [c for c in self.consumers if single_active or c.exclusive]
            # Highest priority, earliest among equals: what a node that had them
            # all would have elected (consumer_choice.ConsumerChoice).
            self.active = min(candidates, key=lambda c: (-c.priority, c.order), default=None)

    @classmethod
    def read(cls, entries: Mapping[Any, Any], alive: Iterable[str], single_active: bool) -> Roster:
        """
        :param entries: the registry hash as ``HGETALL`` answers it.
        :param alive: the nodes whose liveness key exists.
        :returns: the roster of the live nodes' consumers.
        """
        live = set(alive)
        consumers = []
        for field, value in entries.items():
            name = field.decode() if isinstance(field, bytes) else field
            entry = parse_entry(name, value)
            if entry.node in live:
                consumers.append(entry)
        return cls(consumers, single_active)

    @property
    def needs_features(self) -> bool:
        """Whether any consumer asks for more than round-robin (or the queue is single-active)."""
        return self.single_active or any(not c.is_plain for c in self.consumers)

    def nodes(self) -> set[str]:
        """:returns: the nodes that have consumers."""
        return {consumer.node for consumer in self.consumers}

    def takers(self, properties: Mapping[str, str] | None) -> list[Registered]:
        """
        :param properties: the message's selector properties, or ``None`` when
            no consumer has a selector.
        :returns: the consumers that may take a message now, highest priority
            first: the active one alone while exclusive; and only those whose
            selector selects it.
        """
        if self.active is not None:
            pool = [self.active]
        else:
            pool = sorted(self.consumers, key=lambda c: -c.priority)
        if properties is None:
            return pool
        return [c for c in pool if c.selector is None or c.selector.matches(properties)]


def candidate_nodes(takers: list[Registered], here: str, room_here: bool) -> list[Any]:
    """
    :param takers: the consumers that may take a message, best first
        (:meth:`~.consumer_registry.Roster.takers`).
    :param room_here: whether this node's consumers have room.
    :returns: their nodes in the order to try, each once, each followed by the
        windows of its takers there (what its own stream may hold unsettled
        before it counts as full): those of the best priority first, this node
        leading them when it has room, and this node left out when it has none
        (its consumers would only keep the message waiting).
    """
    windows: dict[str, int] = {}
    order: list[str] = []
    best = takers[0].priority if takers else 0
    if room_here and any(t.node == here and t.priority == best for t in takers):
        order.append(here)
    for taker in takers:
        if taker.node == here and not room_here:
            continue
        if taker.node not in windows:
            windows[taker.node] = 0
            if taker.node not in order:
                order.append(taker.node)
        windows[taker.node] += taker.window
    flat: list[Any] = []
    for node in order:
        flat += [node, windows[node]]
    return flat


def candidate_consumers(takers: list[Registered]) -> list[Any]:
    """
    :param takers: the consumers that may take a message, best first
        (:meth:`~.consumer_registry.Roster.takers`).
    :returns: them flat, each as field, node, priority, order: what :data:`~.dispatch_scripts.MOVE`
        picks a message's consumer (or a group's new owner) from, by one node's round-robin.
    """
    flat: list[Any] = []
    for taker in takers:
        flat += [taker.field, taker.node, taker.priority, taker.order]
    return flat
