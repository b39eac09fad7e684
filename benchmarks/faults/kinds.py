"""
The faults, one class each: what it needs (a layout of the cluster and Redis's
``appendfsync``), how it is injected, and how it heals.

A fault is injected, held for its ``hold`` seconds, then healed; the run
measures from the moment it heals.  Adding a fault class is adding a class
here and a line in :data:`FAULTS`.  A fault may also fix a setting of the
nodes (``--engine-wait-replicas``), so that each setting is a row of the table.
"""

from __future__ import annotations

import signal

import attrs
from attrs import frozen

from benchmarks.errors import BenchmarkError
from benchmarks.faults.cluster import ClusterOptions, FaultCluster

__all__ = ["FAULTS", "Fault", "fault_named"]


@frozen
class Fault:
    """
    One kind of fault.

    :ivar name: its name on the command line and in the table.
    :ivar what: what it does, for the table.
    :ivar layout: the cluster layout it needs.
    :ivar fsync: the ``appendfsync`` it needs, or ``None`` for the run's.
    :ivar wait_replicas: the nodes' ``--engine-wait-replicas``, or ``None`` for the run's.
    """

    name: str
    what: str
    layout: str = "direct"
    fsync: str | None = None
    wait_replicas: int | None = None

    def hold(self, down: float, node_timeout: float) -> float:
        """
        :param down: the run's ``--down``, seconds.
        :param node_timeout: the nodes' ``--node-timeout``, seconds.
        :returns: how long the fault lasts before it heals.
        """
        return down

    def options(self, run: ClusterOptions) -> ClusterOptions:
        """:returns: the run's cluster options with the settings this fault fixes."""
        if self.fsync is not None:
            run = attrs.evolve(run, fsync=self.fsync)
        if self.wait_replicas is not None:
            run = attrs.evolve(run, wait_replicas=self.wait_replicas)
        return run

    def inject(self, cluster: FaultCluster) -> None:
        """Break something."""
        raise NotImplementedError

    def heal(self, cluster: FaultCluster) -> None:
        """Mend it."""
        raise NotImplementedError


@frozen
class NodeKill(Fault):
    """SIGKILL node B (the consumers'), start it again after the hold."""

    def inject(self, cluster: FaultCluster) -> None:
        cluster.kill("b")

    def heal(self, cluster: FaultCluster) -> None:
        cluster.restart("b")


@frozen
class NodeStop(Fault):
    """
    SIGSTOP node B past ``--node-timeout`` (twice it, and at least ``down``),
    then SIGCONT: a zombie that still believes it holds what node A claimed.
    """

    def hold(self, down: float, node_timeout: float) -> float:
        return max(down, 2 * node_timeout)

    def inject(self, cluster: FaultCluster) -> None:
        cluster.signal("b", signal.SIGSTOP)

    def heal(self, cluster: FaultCluster) -> None:
        cluster.signal("b", signal.SIGCONT)


@frozen
class RedisKill(Fault):
    """SIGKILL Redis, start it again on its AOF after the hold."""

    def inject(self, cluster: FaultCluster) -> None:
        assert cluster.redis is not None
        cluster.redis.kill()

    def heal(self, cluster: FaultCluster) -> None:
        assert cluster.redis is not None
        cluster.redis.start()


@frozen
class ProxyCut(Fault):
    """
    Node B cut from Redis by the proxy (its connections reset, new ones
    dropped) for the hold; ``long`` holds it past ``--node-timeout``, so that
    its liveness key expires while it still runs and serves its consumers.
    """

    long: bool = False

    def hold(self, down: float, node_timeout: float) -> float:
        return max(down, 2 * node_timeout) if self.long else down

    def inject(self, cluster: FaultCluster) -> None:
        assert cluster.proxy is not None
        cluster.proxy.cut()

    def heal(self, cluster: FaultCluster) -> None:
        assert cluster.proxy is not None
        cluster.proxy.heal()


@frozen
class SentinelFailover(Fault):
    """
    ``SENTINEL FAILOVER`` (or, with ``kill``, a SIGKILL of the primary, which
    the Sentinels notice after their ``down-after-milliseconds``); the heal
    waits for the new primary and for the old one to replicate it (started
    again first when killed).
    """

    kill: bool = False

    def inject(self, cluster: FaultCluster) -> None:
        assert cluster.sentinels is not None
        if self.kill:
            cluster.sentinels.kill_primary()
        else:
            cluster.sentinels.failover()

    def heal(self, cluster: FaultCluster) -> None:
        assert cluster.sentinels is not None
        cluster.sentinels.recover()


def _sentinel_faults() -> list[Fault]:
    """Each Sentinel fault with and without the replica wait."""
    faults: list[Fault] = []
    for name, what, kill in (
        ("sentinel-failover", "SENTINEL FAILOVER", False),
        ("sentinel-kill-primary", "SIGKILL the primary; Sentinels fail over", True),
    ):
        for wait in (0, 1):
            faults.append(
                SentinelFailover(
                    f"{name}-wait{wait}",
                    f"{what}, --engine-wait-replicas {wait}",
                    layout="sentinel",
                    wait_replicas=wait,
                    kill=kill,
                )
            )
    return faults


#: Every fault, by name, in the order the table lists them.
FAULTS: dict[str, Fault] = {
    fault.name: fault
    for fault in (
        NodeKill("node-kill", "SIGKILL node B, started again after the hold"),
        NodeStop("node-stop", "SIGSTOP node B past --node-timeout, then SIGCONT"),
        RedisKill(
            "redis-kill-always", "SIGKILL Redis (appendfsync always), restart", fsync="always"
        ),
        RedisKill(
            "redis-kill-everysec", "SIGKILL Redis (appendfsync everysec), restart", fsync="everysec"
        ),
        ProxyCut("proxy-cut", "node B's Redis connections dropped by a proxy", layout="proxied"),
        ProxyCut(
            "proxy-cut-long",
            "node B cut from Redis past --node-timeout",
            layout="proxied",
            long=True,
        ),
        *_sentinel_faults(),
    )
}


def fault_named(name: str) -> Fault:
    """
    :returns: the fault called ``name``.
    :raises BenchmarkError: when there is none.
    """
    try:
        return FAULTS[name]
    except KeyError:
        raise BenchmarkError(f"faults are {', '.join(FAULTS)}; got {name!r}") from None
