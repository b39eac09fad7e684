"""
The servers a fault acts on: ``redis-server`` with its AOF, killed and started
again on the same port and data, and a TCP proxy on loopback that stands
between one node and Redis and can drop that node's connections for a while.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.cluster import answers_ping
from benchmarks.errors import BenchmarkError
from benchmarks.launcher import free_port

__all__ = ["FSYNC_POLICIES", "PersistentRedis", "Proxy"]

#: ``appendfsync`` values the harness runs Redis with.
FSYNC_POLICIES = ("always", "everysec")
#: Seconds Redis may take to answer PING after a start, and to stop.
REDIS_TIMEOUT = 10.0
#: Bytes the proxy reads at once.
CHUNK = 65536


class PersistentRedis:
    """
    ``redis-server`` on a free loopback port with ``appendonly yes`` and the
    given ``appendfsync``, stopped and killed by its pid.

    :param directory: its data directory (the AOF) and log.
    :param fsync: ``always`` or ``everysec``.
    :param replica_of: the port of a primary on 127.0.0.1 it replicates at its
        first start (a restart leaves the role to the Sentinels).
    :raises BenchmarkError: if ``redis-server`` is missing, the policy unknown,
        or it does not start.
    """

    def __init__(self, directory: Path, fsync: str, replica_of: int | None = None) -> None:
        if fsync not in FSYNC_POLICIES:
            raise BenchmarkError(
                f"appendfsync is one of {', '.join(FSYNC_POLICIES)}; got {fsync!r}"
            )
        binary = shutil.which("redis-server")
        if binary is None:
            raise BenchmarkError(
                "the fault harness needs redis-server (apt-get install redis-server)"
            )
        self.binary = binary
        self.directory = directory
        self.fsync = fsync
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)
        self.start(replica_of)

    @property
    def url(self) -> str:
        """Its ``--engine`` URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, replica_of: int | None = None) -> None:
        """
        Start it (again: same port, same AOF) and wait until it answers PING.

        :param replica_of: the port of the primary it replicates, if any.
        """
        command = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", self.fsync,
            "--dir", str(self.directory),
        ]  # fmt: skip
        if replica_of is not None:
            command += ["--replicaof", "127.0.0.1", str(replica_of)]
        with open(self.directory / "redis.log", "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + REDIS_TIMEOUT
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BenchmarkError(
                    f"redis-server did not start; see {self.directory / 'redis.log'}"
                )
            time.sleep(0.02)

    def answers(self) -> bool:
        """:returns: whether it answers PING (while it loads its AOF it does not)."""
        return answers_ping(self.port)

    def kill(self) -> None:
        """SIGKILL it, as a crash would: no shutdown, no last AOF write."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=REDIS_TIMEOUT)

    def stop(self) -> None:
        """Stop it with SIGTERM, or SIGKILL if it lingers."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=REDIS_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()


class Proxy:
    """
    A TCP proxy on 127.0.0.1 in front of one upstream port, run by an asyncio
    loop in a thread of its own.  :meth:`cut` drops every connection through
    it (a reset, as a lost route or a restarted firewall gives) and drops each
    new one at once until :meth:`heal`.

    :param upstream: the port it forwards to (Redis).
    :ivar port: where it listens.
    :ivar dropped: connections dropped by cuts so far.
    """

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.dropped = 0
        self._cut = False
        self._links: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", self.port), self._loop
        ).result(timeout=REDIS_TIMEOUT)

    @property
    def url(self) -> str:
        """The ``--engine`` URL of Redis through the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            self._drop(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            self._drop(writer)
            return
        self._links.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            for end in (writer, up_writer):
                self._links.discard(end)
                end.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one direction until either end closes; then close the other."""
        try:
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()

    def _drop(self, writer: asyncio.StreamWriter) -> None:
        self.dropped += 1
        writer.transport.abort()

    def cut(self) -> None:
        """Drop every connection now, and every new one until :meth:`heal`."""

        def cut() -> None:
            self._cut = True
            for writer in list(self._links):
                self._drop(writer)
            self._links.clear()

        self._call(cut)

    def heal(self) -> None:
        """Forward new connections again."""

        def heal() -> None:
            self._cut = False

        self._call(heal)

    def _call(self, function: Callable[[], None]) -> None:
        """Run ``function`` on the proxy's loop and wait for it."""

        async def run() -> None:
            function()

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=REDIS_TIMEOUT)

    def close(self) -> None:
        """Stop listening, drop what is open, and end the loop's thread."""
        self.cut()
        self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=REDIS_TIMEOUT)
