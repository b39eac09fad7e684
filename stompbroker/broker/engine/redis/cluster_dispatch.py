"""
Who gets a shared queue's message when its consumers ask for more than
round-robin: selectors, consumer priorities, exclusive consumers, message groups.

A queue whose registered consumers (:mod:`.consumer_registry`) are all plain and
that never had a grouped message is read as before: each node reads what its
own consumers have room for.  Once one asks for more, every node that reads an
entry of the queue decides, from the registry, which node's consumer should
get it (:meth:`ClusterDispatch.decide`):

- the candidates are the exclusive (active) consumer alone while there is one,
  else every consumer, highest priority first; with selectors, only those that
  select the message;
- one script (:data:`~.dispatch_scripts.MOVE`), for the whole batch read,
  gives each entry to the consumer one node's round-robin picks, whatever its
  node: in the highest priority with room (a node's own stream
  ``PREFIX:{q:/queue/NAME}:node:NODE`` below its candidates' windows), the next
  after the last one picked there (field ``t:PRIORITY`` of the mode hash);
  this node keeps what it picks for its own consumers, and the rest moves to
  the consumers' nodes (``XADD`` there, ``XACK`` and ``XDEL`` of the entry
  read); a message of a group goes to the node of its group's owner, a
  consumer (the hash ``PREFIX:{q:/queue/NAME}:groups``, group -> ``NODE/N``), while
  that consumer is registered; a group without one (new, or its owner left or
  died, or an exclusive consumer took over) gets the consumer the same
  round-robin picks, set atomically by the same script.  The entry carries
  its owner (field ``o``), and the receiving node's local queue gives the
  group to that consumer (:meth:`ClusterDispatch.adopt`), first-for-consumer
  as on one node;
- once the queue has had a grouped message, what a node gives back goes to its
  returned stream (``PREFIX:{q:/queue/NAME}:returned``), which the deciding node reads
  first, with the leaving consumer's unregistering in one script
  (:data:`~.grouped_returns.RETURN_GROUPED`), and a grouped entry of the queue's
  stream waits behind what the returned stream holds unread: so a group's
  next owner gets its given-back messages before its newer ones, as on one
  node (a dead node's go the same way, :data:`~.grouped_returns.FORGET_RETURNING`);
- an entry no consumer accepts stays pending on this node, outside its local
  queue, and is decided again when the registry changes.

``x-single-active-consumer`` is the queue's one shared declaration (field
``sa`` of the mode hash, :mod:`.consumer_registry`): a node's local queue never
declares it from its own first SUBSCRIBE (:func:`~.consumer_registry.local_options`) but takes it
from each read of the registry (:meth:`ClusterDispatch.refresh`).

Each node reads its own stream with its queue's stream in one ``XREADGROUP``.
A node that leaves a queue, or dies, hands back what its own stream holds to the
queue's stream (:data:`~.dispatch_scripts.RETURN_NODE`: delivered entries with their delivery
count), and its registry entries and groups are forgotten
(:data:`~.consumer_registry.FORGET_NODE`), so the groups move and a standby
consumer takes over.  Within a node, its local queue chooses among its own
consumers with the one-node rules (:mod:`stompbroker.broker.queueing.dispatch`).
"""

from __future__ import annotations

import asyncio
from itertools import count
from typing import Any

from redis.exceptions import ResponseError

from stompbroker.broker.engine.redis.codec import decode
from stompbroker.broker.engine.redis.consumer_registry import (
    FORGET_NODE,
    REGISTER,
    UNREGISTER,
    Roster,
    candidate_consumers,
    candidate_nodes,
    local_options,
)
from stompbroker.broker.engine.redis.dispatch_scripts import LEAD, MOVE, RESIGN, RETURN_NODE
from stompbroker.broker.engine.redis.group_switch import GroupSwitch
from stompbroker.broker.engine.redis.grouped_returns import forget_returning, give_back_grouped
from stompbroker.broker.engine.redis.keys import (
    byte_counter,
    groups_key,
    lane_stream,
    lane_streams,
    lease_key,
    mode_key,
    node_stream_prefix,
    record_key,
    registry_key,
    returned_stream,
)
from stompbroker.broker.engine.redis.scripts import run_script
from stompbroker.broker.features.selectors import message_properties
from stompbroker.broker.queueing.groups import first_for_consumer
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

__all__ = [
    "ClusterDispatch",
    "candidate_consumers",
    "candidate_nodes",
]

log = logger("stompbroker.broker.engine.redis")

#: Most entries the deciding node reads at once, whatever its own consumers' room.
DECIDE_READ = 200

#: Numbers this node's registry fields, across all its queues and their handles.
_FIELD_NUMBERS = count(1)


class ClusterDispatch:
    """
    One shared queue's consumers in the registry, and the decisions of this node's reads.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param destination: the ``/queue/`` destination.
    :param stream: the queue's stream.
    :param room: how many more messages this node's consumers can take now.
    :param local: this node's local queue of it (its consumers' one-node rules).

    :ivar active: whether reads are decided here (the queue's consumers or
        messages ask for it).
    :ivar own: this node's own stream of the queue.
    """

    def __init__(self, engine: Any, destination: str, stream: str, room: Any, local: Any) -> None:
        self._engine = engine
        self._local = local
        prefix = engine.names.prefix
        self.destination = destination
        self.stream = stream
        self._room = room
        self.registry = registry_key(prefix, destination)
        self.mode = mode_key(prefix, destination)
        self.groups = groups_key(prefix, destination)
        self.node_prefix = node_stream_prefix(prefix, destination)
        self.own = self.node_stream(engine.ids.node)
        #: Where a grouped queue's messages come back to, decided before the
        #: queue's stream and lanes (:data:`~.grouped_returns.RETURN_GROUPED`).
        self.returned = returned_stream(prefix, destination)
        #: Whether the returned stream and its group were made (:meth:`ready`).
        self.returned_made = False
        self.active = False
        self.grouped = False
        #: Whether this node's own stream and its group were made (:meth:`make_own`).
        self.own_made = False
        self.lease = lease_key(prefix, destination)
        #: The switch from plain reading to deciding (:mod:`.group_switch`).
        self.switch = GroupSwitch(engine, self)
        #: Whether this node holds the lease, the one node that reads the
        #: queue's stream and decides, so that each consumer sees its messages
        #: in the queue's order; and when it last took or renewed it.
        self.leading = False
        self._led_at = -1e9
        self.roster = Roster(())
        self._version: Any = None
        #: Whether the registry changed since the held entries were last decided.
        self.changed = False
        self._fields: dict[Any, str] = {}
        #: field -> this node's consumer registered under it (a group's owner).
        self._consumers: dict[str, Any] = {}
        #: Held while what a dead node had is taken over, so that the entries it
        #: held are decided (and a group's go to its new owner) before newer ones.
        self.lock = asyncio.Lock()
        #: Entries no consumer accepts: (stream, entry id, payload), decided again later.
        self.held: list[tuple[str, bytes, bytes]] = []

    def node_stream(self, node: str) -> str:
        """:returns: a node's own stream of this queue."""
        return self.node_prefix + node

    def _lanes_by_priority(self) -> list[str]:
        """:returns: the queue's lanes for priorities 0 to 9, then their byte counters."""
        prefix = self._engine.names.prefix
        lanes = [lane_stream(prefix, self.destination, p) for p in range(10)]
        return [*lanes, *(byte_counter(lane) for lane in lanes)]

    def _records(self, node: str) -> str:
        """:returns: a node's redelivery records of its own stream (:mod:`.redelivery_records`)."""
        return record_key(node, self.node_stream(node))

    # -- the registry ------------------------------------------------------------------

    def register(self, consumer: Any, selector: Any, options: Any, window: int) -> None:
        """Register a local consumer (one script through the ordered writer)."""
        engine = self._engine
        # Unique in the node's life, so that a group never passes to a later
        # consumer that happens to reuse a departed owner's field.
        field = f"{engine.ids.node}/{next(_FIELD_NUMBERS)}"
        self._fields[consumer] = field
        self._consumers[field] = consumer
        single = "" if options is None or options.single_active is None else options.single_active
        lanes = lane_streams(engine.names.prefix, self.destination)
        engine.writer.command(
            "EVALSHA",
            REGISTER,
            2 + len(lanes),
            self.registry,
            self.mode,
            *lanes,
            field,
            engine.ids.node,
            "" if selector is None else selector.text,
            0 if options is None else options.priority,
            int(options is not None and options.exclusive),
            "" if single == "" else int(bool(single)),
            window,
            engine.names.alive(""),
        )
        # x-single-active-consumer alone asks for nothing until the shared
        # declaration says the queue is single-active (refresh).
        if selector is not None or local_options(options) is not None:
            self.active = True

    def unregister(self, consumer: Any) -> None:
        """Remove a local consumer from the registry."""
        for field in self.release([consumer]):
            self._engine.writer.command("EVALSHA", UNREGISTER, 2, self.registry, self.mode, field)

    def release(self, consumers: Any) -> list[str]:
        """
        Forget local consumers that leave, here only: the caller unregisters them.

        :returns: their registry fields.
        """
        fields = []
        for consumer in consumers:
            field = self._fields.pop(consumer, None)
            if field is not None:
                del self._consumers[field]
                fields.append(field)
        return fields

    def give_back(self, messages: list[Any], fields: list[str], leaving: bool) -> Any:
        """
        A grouped queue's give-back (:data:`~.grouped_returns.RETURN_GROUPED`, one
        script through the ordered writer): messages to the returned stream,
        decided before any newer one, and the consumers that leave unregistered
        in the same step.

        :param messages: flat, per message its entry's stream ('' none), entry id,
            payload, and 1 if this node keeps a redelivery record of it (else 0).
        :param fields: the registry fields of the consumers that leave (:meth:`release`).
        :param leaving: this node's last consumer left: its own stream goes back
            too, and it gives up the lease.
        :returns: a Deferred firing with the ids of the entries left to the
            nodes that hold them now.
        """
        if leaving:
            self.own_made = self.returned_made = self.leading = False
        return give_back_grouped(self._engine, self, messages, fields, leaving)

    async def ready(self) -> None:
        """Make this node's own stream, and a grouped queue's returned stream, unless made."""
        if not self.own_made:
            await self._make(self.own)
            self.own_made = True
        if self.grouped and not self.returned_made:
            await self._make(self.returned)
            self.returned_made = True

    def lead_streams(self) -> list[str]:
        """
        :returns: the streams this node reads before the queue's stream or
            lanes: its own; and while it decides, the returned stream.
        """
        if self.leading and self.returned_made:
            return [self.own, self.returned]
        return [self.own]

    def unmade(self) -> None:
        """A read found a stream's group gone: make them again before the next read."""
        self.own_made = self.returned_made = False

    async def _make(self, stream: str) -> None:
        """Make a stream and its group, unless they exist."""
        try:
            await self._engine.client.xgroup_create(
                stream, self._engine.names.group, id="0", mkstream=True
            )
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise

    async def lead(self) -> None:
        """Take or renew the lease (every third of ``--node-timeout``), if it is free."""
        engine = self._engine
        now = engine.clock.seconds()
        if self.leading and now - self._led_at < engine.node_timeout / 3:
            return
        lease_ms = int(engine.node_timeout * 1000)
        self.leading = bool(
            await run_script(engine.client, LEAD, 1, self.lease, engine.ids.node, lease_ms)
        )
        if self.leading:
            self._led_at = now

    def leave(self) -> None:
        """
        This node's last consumer left: hand back what its own stream holds (a
        plain reader reads no more).
        """
        if not self.active:
            self.switch.leave_soon()
        self.own_made = False
        if self.leading:
            self.leading = False
            self._engine.writer.command("EVALSHA", RESIGN, 1, self.lease, self._engine.ids.node)
        engine = self._engine
        counter = byte_counter(self.stream)
        engine.writer.command(
            "EVALSHA",
            RETURN_NODE,
            4,
            self.own,
            self.stream,
            counter,
            self._records(engine.ids.node),
            engine.names.group,
            *self._lanes_by_priority(),
        )

    def observe(self, modes: Any) -> bool:
        """
        Take in the mode hash's ``v`` and ``g`` (read after each read).

        :returns: whether the registry changed since it was last read.
        """
        version, grouped = modes
        if grouped:
            self.grouped = self.active = True
        return bool(version != self._version)

    async def refresh(self) -> None:
        """
        Read the registry and which of its nodes live; forget the dead ones'.

        A registry newer than the one last read marks the held entries for
        deciding again (:attr:`changed`), whoever refreshes: the reader after
        its read, or the claim of dead nodes' entries, which may see a new
        consumer first and leave the reader's next look at ``v`` nothing new.
        """
        engine = self._engine
        client = engine.client
        pipe = client.pipeline(transaction=False)
        pipe.hgetall(self.registry)
        pipe.hmget(self.mode, "v", "sa")
        entries, (version, single) = await pipe.execute()
        nodes = {_node_of(field) for field in entries}
        alive = {engine.ids.node}
        for node in nodes - alive:
            if await client.exists(engine.names.alive(node)):
                alive.add(node)
            else:
                await self.forget(node)
        if version != self._version:
            self.changed = True
        self._version = version
        self.roster = Roster.read(entries, alive, single == b"1")
        self.active = self.active or self.roster.needs_features or self.grouped
        self._local.declare_single_active(self.roster.single_active)

    def adopt(self, message: Message, fields: Any) -> Message:
        """
        Give a grouped message's group, in the local queue, to the consumer
        :data:`~.dispatch_scripts.MOVE` made its owner (field ``o`` of its entry), unless the local
        queue has an owner for it already.

        :returns: the message to enqueue: marked the first of its group for that
            consumer when the group came to it now, as on one node.
        """
        owner = fields.get(b"o")
        group = message.group
        if owner is None or group is None:
            return message
        consumer = self._consumers.get(_text(owner))
        if consumer is not None and self._local.assign_owner(group, consumer):
            return first_for_consumer(message)
        return message

    async def forget(self, node: str) -> None:
        """
        A node is dead: forget its consumers and groups, and hand back its own
        stream; of a grouped queue, with what it held pending, to the returned
        stream, in one script (:data:`~.grouped_returns.FORGET_RETURNING`).
        """
        engine = self._engine
        client = engine.client
        own = self.node_stream(node)
        if self.grouped:
            returned = await forget_returning(engine, self, node)
        else:
            await run_script(client, FORGET_NODE, 3, self.registry, self.mode, self.groups, node)
            counter = byte_counter(self.stream)
            returned = await run_script(
                client,
                RETURN_NODE,
                4,
                own,
                self.stream,
                counter,
                self._records(node),
                engine.names.group,
                *self._lanes_by_priority(),
            )
        if returned > 0:
            log.info(
                "handed back {count} messages of {queue} that dead node {node} was given",
                count=returned,
                queue=self.destination,
                node=node,
            )

    # -- deciding ------------------------------------------------------------------------

    async def decide(self, runs: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
        """As :meth:`decide_locked`, once no dead node's entries are being taken over."""
        async with self.lock:
            return await self.decide_locked(runs)

    async def decide_locked(self, runs: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
        """
        Decide who gets each entry read from the queue's stream (or claimed):
        what stays here is returned; the rest went to other nodes' streams, or
        is held here undecided.

        :param runs: ``(stream, entries)`` as read; this node's own stream's
            entries were decided for it already.
        """
        kept: list[tuple[str, list[Any]]] = []
        batch: list[tuple[str, Any, Any]] = []
        for stream, entries in runs:
            if stream == self.own:
                kept.append((stream, entries))
                continue
            for entry in entries:
                batch.append((stream, entry[0], entry[1]))
        if not batch:
            return kept
        return kept + await self._move([(s, i, f[b"m"], f) for s, i, f in batch if f])

    def take_held(self) -> list[tuple[str, list[Any]]]:
        """
        :returns: the entries nobody took, as runs to decide again (after the
            registry changed) ahead of newer ones, in the same :meth:`decide`,
            so that this node's room counts once for both.
        """
        held, self.held = self.held, []
        return [(stream, [(entry_id, {b"m": payload})]) for stream, entry_id, payload in held]

    async def _move(self, batch: list[tuple[str, Any, bytes, Any]]) -> list[tuple[str, list[Any]]]:
        engine = self._engine
        here = engine.ids.node
        roster = self.roster
        selecting = any(c.selector is not None for c in roster.consumers)
        active = "" if roster.active is None else roster.active.field
        room_here = self._room()
        args: list[Any] = [
            engine.names.group,
            self.node_prefix,
            self.returned,
            here,
            max(room_here, 0),
        ]
        for stream, entry_id, payload, fields in batch:
            _, message = decode(payload)
            properties = message_properties(message) if selecting else None
            takers = roster.takers(properties)
            nodes = candidate_nodes(takers, here, room_here > 0)
            group, closes = message.group, message.closes_group
            consumers = candidate_consumers(takers)
            original = fields.get(b"i", "")
            args += [stream, entry_id, payload, group or "", int(closes), active, original]
            args += [len(nodes) // 2, len(consumers) // 4, *nodes, *consumers]
        answers = await run_script(
            engine.client, MOVE, 3, self.registry, self.groups, self.mode, *args
        )
        kept: list[tuple[str, list[Any]]] = []
        for index, (stream, entry_id, payload, fields) in enumerate(batch):
            target, owner = _text(answers[2 * index]), answers[2 * index + 1]
            if target == here:
                if owner:
                    fields = {**fields, b"o": owner}
                kept.append((stream, [(entry_id, fields)]))
            elif not target:
                self.held.append((stream, entry_id, payload))
        return kept


def _text(value: Any) -> str:
    text: str = value.decode() if isinstance(value, bytes) else value
    return text


def _node_of(field: Any) -> str:
    name: str = field.decode() if isinstance(field, bytes) else field
    return name.rpartition("/")[0]
