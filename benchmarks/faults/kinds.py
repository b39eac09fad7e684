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
import statistics
from typing import Any

import attrs
from attrs import frozen

from benchmarks.errors import BenchmarkError
from benchmarks.faults.clients import Flood, FloodConsumer, History, MemorySampler
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

    def load(self, cluster: FaultCluster, history: History) -> list[Any]:
        """
        :returns: threads (each with ``stop()``) that the run starts as the fault
            is injected and stops as it heals: the fault's own load, if it is one.
        """
        return []

    def figures(self, threads: list[Any], started: float, healed: float) -> dict[str, Any]:
        """:returns: the run's figures of :meth:`load`'s ``threads``, once they stopped."""
        return {}

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


@frozen
class Overload(Fault):
    """
    More load than the cluster carries, for ``seconds`` (a minute): besides the
    run's steady receipted load, ``producers`` on node A send non-persistent
    117-byte messages as fast as the node reads them (a receipt every 100, at
    most 4 unanswered: a pipelining producer) to a queue of their own, whose
    ``consumers`` (``auto``) are on node B.  Nothing breaks: the promise is
    that load is back-pressure, never an ERROR, with the steady load's messages
    all delivered and node A's memory bounded.
    """

    seconds: float = 60.0
    producers: int = 4
    consumers: int = 4

    def hold(self, down: float, node_timeout: float) -> float:
        return self.seconds

    def load(self, cluster: FaultCluster, history: History) -> list[Any]:
        queue = "/queue/faults.overload.flood"

        def on(name: str) -> Any:
            return lambda: [cluster.address(name)]

        threads: list[Any] = [
            FloodConsumer(f"cf{i}", history, on("b"), queue) for i in range(self.consumers)
        ]
        threads += [Flood(f"pf{i}", history, on("a"), queue) for i in range(self.producers)]
        threads.append(MemorySampler(cluster.pid("a")))
        return threads

    def figures(self, threads: list[Any], started: float, healed: float) -> dict[str, Any]:
        sent = sum(thread.sent for thread in threads if isinstance(thread, Flood))
        per_second: dict[int, int] = {}
        for thread in threads:
            if isinstance(thread, FloodConsumer):
                for second, count in thread.per_second.items():
                    per_second[second] = per_second.get(second, 0) + count
        # The steady part: from 5 s into the flood to its last whole second.
        steady = [per_second.get(second, 0) for second in range(int(started) + 5, int(healed))]
        [memory] = [thread for thread in threads if isinstance(thread, MemorySampler)]
        return {
            "flood_sent": sent,
            "flood_sent_per_s": round(sent / max(healed - started, 1e-9)),
            "flood_delivered": sum(per_second.values()),
            "flood_delivered_per_s_min": min(steady, default=0),
            "flood_delivered_per_s_median": round(statistics.median(steady)) if steady else 0,
            "node_a_rss_kb_first": memory.first_kb,
            "node_a_rss_kb_peak": memory.peak_kb,
        }

    def inject(self, cluster: FaultCluster) -> None:
        """The load is the fault (:meth:`load`)."""

    def heal(self, cluster: FaultCluster) -> None:
        """It ends when the load stops."""


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
        Overload(
            "overload",
            "a minute of pipelining producers past what the cluster carries",
        ),
        Overload(
            "overload-workers",
            "the same on one twistd of --workers 2",
            layout="workers",
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
