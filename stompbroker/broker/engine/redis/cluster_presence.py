"""
Presence shared by every node: who subscribes to each destination, in one Redis
hash per destination, and each join and leave told to every node.

The rules (what is tracked, the events, the counts) are the one node's
(:mod:`stompbroker.broker.features.presence`): every node keeps the whole
cluster's entries in its :class:`~stompbroker.broker.features.presence.Presence`,
so the management API, ``/stats`` and the events read it without asking Redis.

Keys (``PREFIX`` is the URL's prefix):

- ``PREFIX:presence:DESTINATION`` (hash): ``node:connection:subscription`` ->
  the entry as JSON (filed again, with the same script, when it goes away or
  comes back);
- ``PREFIX:presence`` (channel): every join and leave, ``j`` or ``l`` then the
  entry as JSON.  A channel of its own, not the topics' fan-out, so that
  presence never shows as a destination in ``/stats``.

:data:`JOIN` (``HSET``, ``PUBLISH``) and :data:`LEAVE` (``HDEL``, then
``PUBLISH`` only if the field was there) are one script each, so an entry and
its notice are one step in Redis, and a leave is told once however many nodes
remove the same entry.  A node applies its own subscriptions' joins and leaves
at once and ignores their notices; it applies the other nodes' in the order
Redis ran the scripts.  Every half ``--node-timeout``
(:mod:`~stompbroker.broker.engine.redis.liveness`) each node removes the
entries of nodes whose liveness key has expired; a node stopping cleanly
removes its own as its connections close.  A node reads every hash at start,
and again after its pub/sub connection came back (it may have missed notices).
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.connection import CONNECTION_ERRORS, RedisUnreachable, run
from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.features.presence import Presence, Present
from stompbroker.logs import logger

__all__ = ["JOIN", "LEAVE", "ClusterPresence", "decode_entry", "encode_entry"]

log = logger("stompbroker.broker.engine.redis")

#: lua/presence_join.lua (what it takes and answers is said there).
JOIN = load("presence_join")

#: lua/presence_leave.lua (what it takes and answers is said there).
LEAVE = load("presence_leave")

#: How often a start-up read of the hashes is tried again when notices came meanwhile.
LOAD_ATTEMPTS = 3


def encode_entry(entry: Present) -> bytes:
    """:returns: ``entry`` as the hash and the notices hold it."""
    return json.dumps(
        [
            entry.destination,
            entry.node,
            entry.connection,
            entry.subscription,
            entry.login,
            entry.since,
            entry.info,
            entry.away,
        ]
    ).encode()


def decode_entry(data: bytes) -> Present:
    """
    :returns: the entry :func:`encode_entry` wrote.
    :raises ValueError: for anything else.
    """
    try:
        fields = json.loads(data)
        # A node of the release before filed six fields: no info, not away.
        destination, node, connection, subscription, login, since, info, away = (
            fields + [None, False] if len(fields) == 6 else fields
        )
    except (TypeError, ValueError) as error:
        raise ValueError(f"not a presence entry: {data[:80]!r}") from error
    if not all(isinstance(value, str) for value in (destination, node, connection, subscription)):
        raise ValueError(f"not a presence entry: {data[:80]!r}")
    if login is not None and not isinstance(login, str):
        raise ValueError(f"not a presence entry: {data[:80]!r}")
    if (info is not None and not isinstance(info, dict)) or not isinstance(away, bool):
        raise ValueError(f"not a presence entry: {data[:80]!r}")
    return Present(
        destination, node, connection, subscription, login, float(since), info=info, away=away
    )


class ClusterPresence:
    """
    This node's part in the cluster's presence: its
    :class:`~stompbroker.broker.features.presence.PresenceShare`.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param presence: the broker's :class:`~stompbroker.broker.features.presence.Presence`.
    """

    def __init__(self, engine: Any, presence: Presence) -> None:
        self._engine = engine
        self.presence = presence
        self._prefix: str = engine.names.presence("")
        self.channel = engine.names.presence_channel
        #: Grows with every notice applied, so that a reading of the hashes
        #: that one crossed is read again.
        self._changes = 0
        presence.share = self

    def _hash(self, destination: str) -> str:
        return self._prefix + destination

    def joined(self, entry: Present) -> None:
        """File a subscription of this node, and tell the other nodes."""
        self._script(JOIN, entry)

    def left(self, entry: Present) -> None:
        """Remove a subscription of this node, and tell the other nodes."""
        self._script(LEAVE, entry)

    def _script(self, script: str, entry: Present) -> None:
        writer = self._engine.writer
        if writer is None:
            return
        writer.command(
            "EVALSHA", script, 1, self._hash(entry.destination), self.channel,
            entry.field, encode_entry(entry),
        )  # fmt: skip

    def notice(self, payload: bytes) -> None:
        """Apply another node's join or leave, in the order Redis ran them."""
        self._changes += 1
        try:
            entry = decode_entry(payload[1:])
        except ValueError:
            log.warn("ignored a malformed presence notice")
            return
        if entry.node == self.presence.node:
            return
        if payload[:1] == b"j":
            self.presence.apply_join(entry)
        else:
            self.presence.apply_leave(entry)

    # -- reading the hashes ------------------------------------------------------------

    def load(self) -> Deferred[None]:
        """
        Read every destination's hash, and make this node's copy of the other
        nodes' entries the same (telling watchers what changed).
        """
        loaded: Deferred[None] = run(self._engine.loop, self._load())
        return loaded

    async def _load(self) -> None:
        for _ in range(LOAD_ATTEMPTS):
            changes = self._changes
            entries = await self._read()
            if changes == self._changes:
                break
        self.presence.reconcile(entries)

    async def _read(self) -> list[Present]:
        client = self._engine.client
        keys = [key async for key in client.scan_iter(match=self._prefix + "/*", count=100)]
        if not keys:
            return []
        async with client.pipeline(transaction=True) as pipe:
            for key in keys:
                pipe.hvals(key)
            replies = await pipe.execute()
        entries = []
        for values in replies:
            for value in values:
                try:
                    entries.append(decode_entry(value))
                except ValueError:
                    log.warn("ignored a malformed presence entry in Redis")
        return entries

    # -- dead nodes ------------------------------------------------------------------------

    def sweep(self) -> None:
        """Remove the entries of nodes whose liveness key has expired (one leave each)."""
        run(self._engine.loop, self._sweep()).addErrback(self._failed)

    async def _sweep(self) -> None:
        nodes = self.presence.nodes() - {self.presence.node}
        if not nodes:
            return
        engine = self._engine
        live = {node.name for node in await engine.liveness.nodes().asFuture(engine.loop)}
        dead = nodes - live
        for entry in self.presence.others():
            if entry.node in dead:
                self._script(LEAVE, entry)

    @staticmethod
    def _failed(failure: Any) -> None:
        if failure.check(RedisUnreachable, *CONNECTION_ERRORS):
            return
        log.failure("removing dead nodes' subscribers from presence failed", failure)
