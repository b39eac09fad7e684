"""
The ``sentinel`` layout's servers: a primary, one replica (each a
:class:`~benchmarks.faults.servers.PersistentRedis` with its AOF) and three
``redis-sentinel`` processes that watch them with a short
``down-after-milliseconds``, so that a killed primary fails over in seconds.

Which server is the primary changes with every failover: the group asks the
Sentinels, never assumes.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.errors import BenchmarkError
from benchmarks.faults.servers import REDIS_TIMEOUT, PersistentRedis
from benchmarks.launcher import free_port

__all__ = ["MASTER", "SentinelGroup"]

#: The name the Sentinels monitor the primary under.
MASTER = "faults"
#: The Sentinels' ``down-after-milliseconds``: how long a primary may be silent.
DOWN_AFTER_MS = 1000
#: Seconds a failover (or the group's start) may take.
SETTLE_TIMEOUT = 30.0


class SentinelGroup:
    """
    A primary, a replica and three Sentinels (quorum 2) on 127.0.0.1.

    :param directory: where each server and Sentinel gets its files and log.
    :param fsync: the servers' ``appendfsync``.
    :ivar servers: the two servers, by port (which one is the primary changes).
    :ivar deposed: the port of the primary the last fault removed, until :meth:`recover`.
    :raises BenchmarkError: when ``redis-sentinel`` or redis-py is missing, or
        the group does not settle.
    """

    def __init__(self, directory: Path, fsync: str) -> None:
        binary = shutil.which("redis-sentinel")
        if binary is None:
            raise BenchmarkError(
                "the sentinel faults need redis-sentinel (apt-get install redis-sentinel)"
            )
        try:
            import redis
        except ImportError:
            raise BenchmarkError(
                "the sentinel faults need redis-py (pip install 'stompbroker[redis]')"
            ) from None
        self._redis = redis
        self.directory = directory
        self.sentinels: list[tuple[int, subprocess.Popen[bytes]]] = []
        self.deposed: int | None = None
        primary = PersistentRedis(directory / "primary", fsync)
        self.servers = {primary.port: primary}
        try:
            replica = PersistentRedis(directory / "replica", fsync, replica_of=primary.port)
            self.servers[replica.port] = replica
            self._settle(lambda: self._replicas(primary.port) == 1)
            for _ in range(3):
                self._start_sentinel(binary, primary.port)
            self._settle(
                lambda: all(
                    self._says(port, "num-slaves") == "1"
                    and self._says(port, "num-other-sentinels") == "2"
                    for port, _ in self.sentinels
                )
            )
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """The nodes' ``--engine`` URL: the primary through the three Sentinels."""
        hosts = ",".join(f"127.0.0.1:{port}" for port, _ in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def _start_sentinel(self, binary: str, primary: int) -> None:
        port = free_port()
        config = self.directory / f"sentinel-{port}.conf"
        config.write_text(
            f"port {port}\n"
            "bind 127.0.0.1\n"
            f"dir {self.directory}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} 10000\n"
        )
        with open(self.directory / f"sentinel-{port}.log", "ab") as log:
            process = subprocess.Popen([binary, str(config)], stdout=log, stderr=subprocess.STDOUT)
        self.sentinels.append((port, process))
        self._settle(lambda: self._says(port, "name") == MASTER)

    def _client(self, port: int) -> Any:
        return self._redis.Redis(
            host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True
        )

    def _says(self, port: int, field: str) -> str:
        """:returns: a field of ``SENTINEL MASTER`` as the Sentinel on ``port`` sees it."""
        try:
            with self._client(port) as client:
                return str(client.sentinel_master(MASTER).get(field, ""))
        except self._redis.RedisError:
            return ""

    def _role(self, port: int) -> dict[str, Any]:
        """:returns: ``INFO replication`` of the server on ``port`` ({} while it is down)."""
        try:
            with self._client(port) as client:
                return dict(client.info("replication"))
        except self._redis.RedisError:
            return {}

    def _replicas(self, port: int) -> int:
        """:returns: how many replicas the server on ``port`` has online."""
        info = self._role(port)
        return sum(
            1
            for key, value in info.items()
            if key.startswith("slave")
            and isinstance(value, dict)
            and value.get("state") == "online"
        )

    @staticmethod
    def _settle(condition: Callable[[], bool], timeout: float = SETTLE_TIMEOUT) -> None:
        """Poll ``condition``; :raises BenchmarkError: past ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise BenchmarkError("the Sentinel group did not settle in time")
            time.sleep(0.05)

    def primary(self) -> int:
        """:returns: the port of the primary the Sentinels name now."""
        for port, _ in self.sentinels:
            try:
                with self._client(port) as client:
                    return int(client.sentinel_get_master_addr_by_name(MASTER)[1])
            except (self._redis.RedisError, TypeError):
                continue
        raise BenchmarkError("no Sentinel answers")

    def failover(self) -> None:
        """Ask a Sentinel for ``SENTINEL FAILOVER`` (the primary is deposed, not killed)."""
        self.deposed = self.primary()
        with self._client(self.sentinels[0][0]) as client:
            client.execute_command("SENTINEL", "FAILOVER", MASTER)

    def kill_primary(self) -> None:
        """SIGKILL the primary: the Sentinels fail over once it is silent for ``DOWN_AFTER_MS``."""
        self.deposed = self.primary()
        self.servers[self.deposed].kill()

    def recover(self) -> None:
        """
        Wait until the Sentinels name a new primary that has the role; start
        the deposed server again if it was killed, and wait until the new
        primary has it as a replica (the Sentinels reconfigure it), so that a
        RECEIPT that waits for a replica can have one again.

        :raises BenchmarkError: when there was no failover or it does not end in time.
        """
        old = self.deposed
        if old is None:
            raise BenchmarkError("no failover to recover from")
        self._settle(
            lambda: self.primary() != old and self._role(self.primary()).get("role") == "master"
        )
        if not self.servers[old].answers():
            self.servers[old].start()
        self._settle(lambda: self._replicas(self.primary()) == 1)
        self.deposed = None

    def stop(self) -> None:
        """Stop the Sentinels and the servers, each by its pid."""
        for _, process in self.sentinels:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=REDIS_TIMEOUT)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=REDIS_TIMEOUT)
        for server in self.servers.values():
            server.stop()
