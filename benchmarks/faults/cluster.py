"""
The cluster of one run: a ``redis-server`` with its AOF, two nodes on it (A for
the publishers, B for the consumers), and, when the fault asks for it, the proxy
between node B and Redis, or a primary, a replica and three Sentinels in Redis's
place (the nodes then find the primary through the Sentinels).

A node killed is started again by :meth:`FaultCluster.restart` on a new port,
as a supervisor would; the clients ask :meth:`FaultCluster.address` where a
node listens each time they connect.  A fault that needs another layout says
so by its ``layout``, and this is the one place that builds it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from attrs import define, field

from benchmarks.errors import BenchmarkError
from benchmarks.faults.sentinels import SentinelGroup
from benchmarks.faults.servers import PersistentRedis, Proxy
from benchmarks.launcher import BrokerProcess

__all__ = ["LAYOUTS", "ClusterOptions", "FaultCluster"]

#: The layouts a fault may ask for: both nodes straight on Redis, node B
#: through the harness's proxy, both nodes on a primary and a replica
#: through three Sentinels (``redis+sentinel://``), or one twistd of
#: ``--workers 2`` on Redis that is both ``a`` and ``b`` (its port is shared:
#: the kernel gives each connection to either worker).
LAYOUTS = ("direct", "proxied", "sentinel", "workers")


@define(frozen=True)
class ClusterOptions:
    """
    How the nodes run.

    :ivar node_timeout: their ``--node-timeout``, seconds.
    :ivar outage_hold: their ``--engine-outage-hold``, seconds.
    :ivar fsync: Redis's ``appendfsync``.
    :ivar reactor: the nodes' twistd reactor.
    :ivar node_args: more options for both nodes.
    :ivar wait_replicas: their ``--engine-wait-replicas``: replicas a RECEIPT waits for.
    """

    node_timeout: float = 2.0
    outage_hold: float = 30.0
    fsync: str = "everysec"
    reactor: str = "uvloop"
    node_args: tuple[str, ...] = ()
    wait_replicas: int = 0


@define
class FaultCluster:
    """
    Redis (or a Sentinel group) and nodes ``a`` and ``b``, started by
    :meth:`start`, stopped by :meth:`stop`.

    :ivar workdir: where each process gets a directory and a log.
    :ivar options: how the nodes run.
    :ivar layout: one of :data:`LAYOUTS`.
    """

    workdir: Path
    options: ClusterOptions
    layout: str = "direct"
    redis: PersistentRedis | None = None
    proxy: Proxy | None = None
    sentinels: SentinelGroup | None = None
    nodes: dict[str, BrokerProcess] = field(factory=dict)
    starts: int = 0

    def start(self) -> None:
        """Start Redis (or the Sentinel group), the proxy if the layout has one, and both nodes."""
        if self.layout not in LAYOUTS:
            raise BenchmarkError(f"layouts are {', '.join(LAYOUTS)}; got {self.layout!r}")
        if self.layout == "sentinel":
            self.sentinels = SentinelGroup(self.workdir / "sentinel", self.options.fsync)
        else:
            self.redis = PersistentRedis(self.workdir / "redis", self.options.fsync)
            if self.layout == "proxied":
                self.proxy = Proxy(self.redis.port)
        if self.layout == "workers":
            supervisor = self.nodes["a"] = self.nodes["b"] = self._node("a", "--workers", "2")
            _wait_for_workers(supervisor, 2)
            return
        for name in ("a", "b"):
            self.nodes[name] = self._node(name)

    def engine_url(self, name: str) -> str:
        """
        :returns: node ``name``'s ``--engine`` URL (through the proxy for B when
            proxied, through the Sentinels in the ``sentinel`` layout).
        """
        if self.sentinels is not None:
            return self.sentinels.url
        if self.redis is None:
            raise BenchmarkError("the cluster is not started")
        if name == "b" and self.proxy is not None:
            return self.proxy.url
        return self.redis.url

    def _node(self, name: str, *more: str) -> BrokerProcess:
        self.starts += 1
        options = self.options
        return BrokerProcess(
            self.workdir / f"node-{name}-{self.starts}",
            "--engine", self.engine_url(name),
            "--node-timeout", f"{options.node_timeout:g}",
            "--engine-outage-hold", f"{options.outage_hold:g}",
            "--engine-wait-replicas", str(options.wait_replicas),
            *options.node_args,
            *more,
            http=None,
            reactor=options.reactor,
        )  # fmt: skip

    def address(self, name: str) -> tuple[str, int]:
        """:returns: where node ``name`` listens now."""
        return self.nodes[name].address

    def pid(self, name: str) -> int:
        """:returns: node ``name``'s process id."""
        return self.nodes[name].pid

    def kill(self, name: str) -> None:
        """SIGKILL node ``name``, as a crash would."""
        self.nodes[name].kill()

    def restart(self, name: str) -> None:
        """Start node ``name`` again (a new process, a new port, a new node token)."""
        self.nodes[name].stop()
        self.nodes[name] = self._node(name)

    def signal(self, name: str, number: signal.Signals) -> None:
        """Send node ``name`` a signal (SIGSTOP, SIGCONT) by its pid."""
        os.kill(self.nodes[name].pid, number)

    def logs(self) -> dict[str, str]:
        """:returns: each live node's log path, for the run's record."""
        return {name: str(node.log_path) for name, node in self.nodes.items()}

    def stop(self) -> None:
        """Stop the nodes (waking a stopped one first), the proxy, and Redis or the Sentinels."""
        for node in {id(node): node for node in self.nodes.values()}.values():
            if node.process.poll() is None:
                os.kill(node.pid, signal.SIGCONT)
            node.stop()
        if self.proxy is not None:
            self.proxy.close()
        if self.redis is not None:
            self.redis.stop()
        if self.sentinels is not None:
            self.sentinels.stop()


#: Seconds a supervisor's workers may take to start (each logs that it is ready).
WORKERS_START = 30.0


def _wait_for_workers(supervisor: BrokerProcess, count: int) -> None:
    """
    Wait until ``count`` workers of ``supervisor`` said they are ready: the
    supervisor listens at once, its workers take a moment to start.

    :raises BenchmarkError: if they do not within :data:`WORKERS_START`.
    """
    deadline = time.monotonic() + WORKERS_START
    while time.monotonic() < deadline:
        if supervisor.log_path.read_text(errors="replace").count(" ready") >= count:
            return
        time.sleep(0.2)
    raise BenchmarkError(f"the {count} workers did not start within {WORKERS_START:g} s")
