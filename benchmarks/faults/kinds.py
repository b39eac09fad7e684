"""
The faults, one class each: what it needs (a layout of the cluster and Redis's
``appendfsync``), how it is injected, and how it heals.

A fault is injected, held for its ``hold`` seconds, then healed; the run
measures from the moment it heals.  Adding a fault class is adding a class
here and a line in :data:`FAULTS`: a Sentinel failover, for instance, would
ask for a ``sentinel`` layout (a primary, a replica and three Sentinels, built
in :mod:`benchmarks.faults.cluster`) and inject ``SENTINEL FAILOVER`` or a
SIGKILL of the primary.
"""

from __future__ import annotations

import signal

from attrs import frozen

from benchmarks.errors import BenchmarkError
from benchmarks.faults.cluster import FaultCluster

__all__ = ["FAULTS", "Fault", "fault_named"]


@frozen
class Fault:
    """
    One kind of fault.

    :ivar name: its name on the command line and in the table.
    :ivar what: what it does, for the table.
    :ivar layout: the cluster layout it needs.
    :ivar fsync: the ``appendfsync`` it needs, or ``None`` for the run's.
    """

    name: str
    what: str
    layout: str = "direct"
    fsync: str | None = None

    def hold(self, down: float, node_timeout: float) -> float:
        """
        :param down: the run's ``--down``, seconds.
        :param node_timeout: the nodes' ``--node-timeout``, seconds.
        :returns: how long the fault lasts before it heals.
        """
        return down

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
