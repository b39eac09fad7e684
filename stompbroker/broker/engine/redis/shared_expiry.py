"""
A policy's queue ``expires`` on the shared ``/queue/`` streams of the redis
engine (docs/policies.md, docs/cluster.md): a queue that no node has a consumer
of for the policy's time is deleted, with its messages, as on one node (and as
RabbitMQ's queue TTL): the time counts from the queue's making, and from its
last consumer's leaving, whichever node it was on.  SENDs do not count as use.

Nothing is written per message or per SUBSCRIBE: the consumer registries
(:mod:`.consumer_registry`) say already whether a queue has consumers, and the
version of each (field ``v`` of the mode hash ``PREFIX:{q:/queue/X}:mode``) changes
with every SUBSCRIBE and UNSUBSCRIBE.  Once a second, one node, the holder of
the lease ``PREFIX:{expiry}:lease`` (:data:`LEASE`), sweeps: it reads the
cluster's queue names (``SMEMBERS PREFIX:queues``), keeps those a policy with
``expires`` is in force on, and runs :data:`SWEEP` for them, 100 at a time.
For each queue the script keeps a mark in two hashes:

- ``PREFIX:{expiry}:used``: queue -> since when (Redis's ``TIME``, ms) it is unused;
- ``PREFIX:{expiry}:tags``: queue -> the policy, its ``expires`` and the registry's
  version the mark was taken under;

and sets the mark to now while the queue has consumers, when the registry's
version moved (a consumer came or went since the last sweep), or when the
policy in force changed (so a policy set on an existing queue counts from its
setting, as on one node).  A queue unused for longer than its ``expires`` is
claimed (its mark moved :data:`CLAIM` ms ahead, so no sweep takes it again
meanwhile) and deleted by the sweeping node as the management's delete does
(:meth:`~.queue_actions.ClusterQueueActions.delete`): refused if a consumer
came meanwhile, the streams deleted, every node told to drop its handle.  A
queue whose streams are gone has its mark removed.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.engine.redis.connection import run
from stompbroker.broker.engine.redis.keys import lane_streams, mode_key, registry_key
from stompbroker.broker.engine.redis.scripts import load, run_script
from stompbroker.broker.engine.shared_queues import QueueConsumed
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.routing.destinations import QUEUE_PREFIX
from stompbroker.logs import logger

__all__ = ["CLAIM", "INTERVAL", "LEASE", "SWEEP", "SharedExpiry", "candidates"]

log = logger("stompbroker.broker.engine.redis")

#: Seconds between sweeps, and how long a sweeping node's lease lasts (ms).
INTERVAL = 1.0
LEASE_MS = 3000
#: Milliseconds a claimed queue's mark moves ahead: the deleting node's time.
CLAIM = 30_000
#: Queues one script looks at.
BATCH = 100

#: lua/take_lease.lua (what it takes and answers is said there).
LEASE = load("take_lease")

#: lua/expiry_sweep.lua (what it takes and answers is said there).
SWEEP = load("expiry_sweep")


def candidates(policies: Policies, names: Any) -> list[tuple[str, int, str]]:
    """
    :param names: the cluster's queue names (bytes or text).
    :returns: ``(queue, expires ms, policy)`` of the ``/queue/`` names a
        policy with ``expires`` is in force on, sorted.
    """
    found = []
    for raw in names:
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        if not name.startswith(QUEUE_PREFIX):
            continue
        policy = policies.policy_for(name)
        if policy is not None and policy.settings.expires is not None:
            found.append((name, policy.settings.expires, policy.name))
    return sorted(found)


class SharedExpiry:
    """
    Deletes the shared queues a policy's ``expires`` has run out on (one node
    at a time); :meth:`tick` once a second.

    :param engine: the redis engine (``client``, ``names``, ``ids``, ``loop``,
        ``queue_names``, :meth:`shared_queues`).
    :param policies: this node's policies (the configuration's and the cluster's).
    """

    def __init__(self, engine: Any, policies: Policies) -> None:
        self._engine = engine
        self._policies = policies
        names = engine.names
        self.lease = names.expiry_lease
        self.used = names.expiry_used
        self.tags = names.expiry_tags
        self._sweeping = False

    def _in_force(self) -> bool:
        """Whether any policy sets a queue ``expires`` (else a tick costs nothing)."""
        return any(policy.settings.expires is not None for policy in self._policies.listed())

    def tick(self) -> None:
        """Sweep, if a policy sets ``expires`` and the last sweep is done."""
        if self._sweeping or not self._in_force():
            return
        self._sweeping = True
        swept = run(self._engine.loop, self.sweep())
        swept.addErrback(_failed)
        swept.addBoth(self._swept)

    def _swept(self, result: Any) -> None:
        self._sweeping = False

    async def sweep(self) -> list[str]:
        """
        :returns: the queues this node deleted as expired (none unless it holds the lease).
        """
        engine = self._engine
        client = engine.client
        if not int(await run_script(client, LEASE, 1, self.lease, engine.ids.node, LEASE_MS)):
            return []
        found = candidates(self._policies, await client.smembers(engine.queue_names.key))
        deleted = []
        for start in range(0, len(found), BATCH):
            for queue in await self._expired(found[start : start + BATCH]):
                if await self._delete(queue):
                    deleted.append(queue)
        return deleted

    async def _expired(self, batch: list[tuple[str, int, str]]) -> list[str]:
        engine = self._engine
        prefix = engine.names.prefix
        keys: list[str] = [self.used, self.tags]
        args: list[Any] = [CLAIM]
        for queue, expires, policy in batch:
            keys += [registry_key(prefix, queue), mode_key(prefix, queue)]
            keys += lane_streams(prefix, queue)
            args += [queue, expires, policy]
        reply = await run_script(engine.client, SWEEP, len(keys), *keys, *args)
        return [name.decode() if isinstance(name, bytes) else str(name) for name in reply]

    async def _delete(self, queue: str) -> bool:
        """Delete an expired queue cluster-wide; ``False`` if a consumer came meanwhile."""
        engine = self._engine
        try:
            acted = await engine.shared_queues().delete(queue).asFuture(engine.loop)
        except QueueConsumed:
            return False
        if acted.complete:
            await engine.client.hdel(self.used, queue)
            await engine.client.hdel(self.tags, queue)
        log.info(
            "queue {destination} expired unused: deleted with {count} messages{partly}",
            destination=queue,
            count=acted.count,
            partly="" if acted.complete else " (not deleted: some nodes did not answer)",
        )
        return bool(acted.complete)


def _failed(failure: Any) -> None:
    log.warn("sweeping expired queues failed: {error}", error=str(failure.value))
