"""
A real ``redis-server`` (Debian's package) on a free loopback port, for the
tests of the redis engine.

Where ``redis-server`` is missing the tests that need it are skipped, with the
reason, unless ``STOMPBROKER_REQUIRE_REDIS=1`` (set by ``.ci/run``, which
installs it): they then fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from benchmarks.launcher import LOOPBACK_HTTP
from tests.support.clients import Collector, connect
from tests.support.process import BrokerProcess, free_port

REQUIRE = os.environ.get("STOMPBROKER_REQUIRE_REDIS") == "1"


def redis_server_binary(name: str = "redis-server") -> str:
    """
    :param name: ``redis-server`` or ``redis-sentinel`` (Debian's packages of those names).
    :returns: its path.
    :raises pytest.skip.Exception: if it is missing (a failure under CI).
    """
    found = shutil.which(name) or (
        f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None
    )
    if found is None:
        reason = f"{name} is not installed (apt-get install {name})"
        if REQUIRE:
            pytest.fail(f"{reason}, and STOMPBROKER_REQUIRE_REDIS=1 requires it")
        pytest.skip(reason)
    return found


class RedisServer:
    """
    ``redis-server --port FREE --save '' --appendonly yes --dir TMP`` on 127.0.0.1.

    :param directory: its data directory (the AOF lands there).
    :param password: ``requirepass``, or ``None``.
    :param replica_of: the port of a primary on 127.0.0.1 this server replicates.
    """

    def __init__(
        self, directory: Path, password: str | None = None, replica_of: int | None = None
    ) -> None:
        self.directory = directory
        self.password = password
        self.replica_of = replica_of
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        """The ``--engine`` URL of this server (with its password, if any)."""
        credentials = f":{self.password}@" if self.password else ""
        return f"redis://{credentials}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it (again, on the same port and data), and wait until it answers PING."""
        command = [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--dir",
            str(self.directory),
        ]
        if self.password:
            command += ["--requirepass", self.password]
        if self.replica_of is not None:
            command += ["--replicaof", "127.0.0.1", str(self.replica_of)]
        log = open(self.directory / "redis.log", "ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            if self.ping():
                return
            time.sleep(0.05)
        raise TimeoutError(f"redis-server does not answer on port {self.port}")

    def ping(self) -> bool:
        """:returns: whether the server answers (a NOAUTH error counts as an answer)."""
        return _pings(self.port)

    def kill(self) -> None:
        """SIGKILL it by its PID, as a crash would (no shutdown, no last AOF write)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """Stop it by its PID (SIGTERM; SIGKILL if it lingers)."""
        if self.process is not None:
            _stop(self.process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process`` by its PID: SIGTERM, SIGKILL if it lingers."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _pings(port: int) -> bool:
    """:returns: whether a server on ``port`` answers PING (a NOAUTH error counts as an answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


#: The name the test Sentinels monitor the primary under.
MASTER = "mymaster"


class SentinelProcess:
    """
    ``redis-sentinel`` on 127.0.0.1 monitoring ``MASTER`` at ``primary_port`` (quorum 2),
    with a short ``down-after-milliseconds`` so that a killed primary fails over quickly.
    """

    def __init__(self, directory: Path, primary_port: int, down_after_ms: int = 1000) -> None:
        self.port = free_port()
        config = directory / f"sentinel-{self.port}.conf"
        config.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {directory}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {down_after_ms}\n"
            f"sentinel failover-timeout {MASTER} 10000\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        log = open(directory / f"sentinel-{self.port}.log", "ab")
        self.process = subprocess.Popen(
            [redis_server_binary("redis-sentinel"), str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 10
        while not _pings(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-sentinel on port {self.port} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop it by its PID."""
        _stop(self.process)


class SentinelGroup:
    """
    A primary, one replica and three Sentinels, each a real process on 127.0.0.1.

    :ivar servers: the primary and the replica, by port (which is which changes on failover).
    """

    def __init__(self, directory: Path, down_after_ms: int = 1000) -> None:
        primary_dir = directory / "primary"
        replica_dir = directory / "replica"
        primary_dir.mkdir()
        replica_dir.mkdir()
        primary = RedisServer(primary_dir)
        self.servers = {primary.port: primary}
        self.sentinels: list[SentinelProcess] = []
        try:
            replica = RedisServer(replica_dir, replica_of=primary.port)
            self.servers[replica.port] = replica
            self.wait_until(lambda: self.info(primary.port).get("connected_slaves") == "1")
            self.sentinels = [
                SentinelProcess(directory, primary.port, down_after_ms) for _ in range(3)
            ]
            # Each Sentinel has found the replica and the other Sentinels.
            self.wait_until(
                lambda: all(
                    self.sentinel_says(sentinel, "num-slaves") == "1"
                    and self.sentinel_says(sentinel, "num-other-sentinels") == "2"
                    for sentinel in self.sentinels
                )
            )
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """The ``--engine`` URL that finds the primary through the three Sentinels."""
        hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    @staticmethod
    def wait_until(condition: Any, timeout: float = 20) -> None:
        """Poll ``condition`` every 50 ms; :raises TimeoutError: past ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError("the Sentinel group did not settle in time")
            time.sleep(0.05)

    @staticmethod
    def _client(port: int) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True)

    def info(self, port: int) -> dict[str, str]:
        """:returns: ``INFO replication`` of the server on ``port`` ({} if it is down)."""
        import redis

        try:
            with self._client(port) as client:
                return {key: str(value) for key, value in client.info("replication").items()}
        except redis.RedisError:
            return {}

    def sentinel_says(self, sentinel: SentinelProcess, field: str) -> str:
        """:returns: a field of ``SENTINEL MASTER mymaster`` as ``sentinel`` sees it."""
        import redis

        try:
            with self._client(sentinel.port) as client:
                return str(client.sentinel_master(MASTER).get(field, ""))
        except redis.RedisError:
            return ""

    def primary_port(self) -> int:
        """:returns: the port of the primary the Sentinels name now."""
        import redis

        for sentinel in self.sentinels:
            try:
                with self._client(sentinel.port) as client:
                    return int(client.sentinel_get_master_addr_by_name(MASTER)[1])
            except redis.RedisError:
                continue
        raise RuntimeError("no Sentinel answers")

    def failover(self) -> int:
        """``SENTINEL FAILOVER``; wait until the Sentinels name the other server; :returns: it."""
        old = self.primary_port()
        with self._client(self.sentinels[0].port) as client:
            client.execute_command("SENTINEL", "FAILOVER", MASTER)
        return self.wait_for_new_primary(old)

    def wait_for_new_primary(self, old: int, timeout: float = 20) -> int:
        """Wait until the Sentinels name a primary but ``old``, and it says so; :returns: it."""
        self.wait_until(
            lambda: (
                self.primary_port() != old
                and self.info(self.primary_port()).get("role") == "master"
            ),
            timeout,
        )
        return self.primary_port()

    def entries_added(self, port: int, key: str) -> int:
        """
        :returns: how many entries were ever added to the stream ``key`` on the
            server on ``port`` (``XINFO STREAM``'s ``entries-added``; 0 if none).
        """
        import redis

        try:
            with self._client(port) as client:
                return int(client.xinfo_stream(key).get("entries-added", 0))
        except redis.ResponseError:
            return 0

    def stop(self) -> None:
        """Stop every process of the group by its PID."""
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in self.servers.values():
            server.stop()


class AckingCollector(Collector):
    """A client-individual consumer that acknowledges each message as it arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.connection: Any = None

    def on_message(self, frame: Any) -> None:
        super().on_message(frame)
        self.connection.ack(frame.headers["ack"])


class SteadyPublisher(threading.Thread):
    """Sends persistent messages, each with a receipt, at a steady pace until stopped."""

    def __init__(self, address: tuple[str, int], queue: str) -> None:
        super().__init__(daemon=True)
        self.connection, self.events = connect(address)
        self.queue = queue
        self.sent = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set() and not self.events.errors:
            body = f"m{self.sent}"
            self.connection.send(
                self.queue, body.encode(), headers={"persistent": "true"}, receipt=body
            )
            self.sent += 1
            time.sleep(0.002)

    def receipted(self) -> set[bytes]:
        """:returns: the bodies of the messages the broker sent a RECEIPT for."""
        return {receipt.encode() for receipt in self.events.receipts}


def flowing(inbox: Collector, more: int = 100, timeout: float = 20) -> bool:
    """Barrier: ``more`` new messages reach the consumer (the nodes write and read again)."""
    seen = len(inbox.messages)
    return inbox.wait_for(lambda: len(inbox.messages) >= seen + more, timeout=timeout)


@contextmanager
def steady_load(
    sender: BrokerProcess, receiver: BrokerProcess
) -> Iterator[tuple[SteadyPublisher, AckingCollector]]:
    """
    A client-individual consumer on ``receiver`` that acknowledges each message, and a
    :class:`SteadyPublisher` of receipted persistent messages on ``sender``, to one new
    queue; both disconnect (the publisher stopped) at the end.
    """
    queue = f"/queue/load.{uuid.uuid4().hex[:8]}"
    inbox = AckingCollector()
    consumer, _ = connect(receiver.address, collector=inbox)
    inbox.connection = consumer
    consumer.subscribe(
        queue, id="c", ack="client-individual", headers={"prefetch-count": 200}, receipt="on"
    )
    assert inbox.wait_for(lambda: "on" in inbox.receipts)
    publisher = SteadyPublisher(sender.address, queue)
    publisher.start()
    try:
        yield publisher, inbox
    finally:
        publisher.stopping.set()
        publisher.join(timeout=10)
        consumer.disconnect()
        publisher.connection.disconnect()


def drain(publisher: SteadyPublisher, inbox: AckingCollector, wait: float = 15) -> set[bytes]:
    """
    Stop the publisher, wait for its receipts and for what they name to be delivered
    (up to ``wait`` s), and check that no copy came unmarked, nobody got an ERROR and
    nobody was cut off.

    :returns: the bodies receipted.
    """
    publisher.stopping.set()
    publisher.join(timeout=10)
    assert publisher.events.wait_for(
        lambda: len(publisher.events.receipts) == publisher.sent, timeout=20
    ), (publisher.sent, len(publisher.events.receipts))
    receipted = publisher.receipted()
    inbox.wait_for(lambda: receipted <= set(inbox.bodies()), timeout=wait)
    assert unmarked_copies(inbox) == []
    assert publisher.events.errors == [] and inbox.errors == []
    assert not inbox.disconnected and not publisher.events.disconnected
    return receipted


def unmarked_copies(inbox: Collector) -> list[bytes]:
    """:returns: the bodies delivered more than once with a later copy not ``redelivered``."""
    copies: dict[bytes, list[Any]] = defaultdict(list)
    for message in list(inbox.messages):
        copies[message.body].append(message)
    return [
        body
        for body, delivered in copies.items()
        if any(copy.headers.get("redelivered") != "true" for copy in delivered[1:])
    ]


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis server of its own for a test module."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[Any]:
    """A plain redis-py client of the module's server, on an emptied database."""
    import redis

    connection = redis.Redis(port=redis_server.port)
    connection.flushdb()
    yield connection
    connection.close()


#: The nodes' --node-timeout in the cluster tests, in seconds: short, so a dead
#: node's messages come back quickly.
NODE_TIMEOUT = "2"


def node(
    workdir: Path, server: RedisServer | SentinelGroup, *args: str, http: str | None = None
) -> BrokerProcess:
    """
    Start a broker node on ``server`` (or a Sentinel group) with a short node timeout.

    :param http: its ``--http`` endpoint (``LOOPBACK_HTTP`` for the API), none by default.
    """
    return BrokerProcess(
        workdir,
        "--engine",
        server.url,
        "--node-timeout",
        NODE_TIMEOUT,
        *args,
        http=http,
        reactor="uvloop",
    )


@contextmanager
def started_nodes(
    tmp_path_factory: pytest.TempPathFactory,
    server: RedisServer,
    names: str,
    http: str | None = None,
) -> Iterator[list[BrokerProcess]]:
    """Nodes on ``server``, one per letter of ``names``, each in a directory of its own."""
    started = [node(tmp_path_factory.mktemp(name), server, http=http) for name in names]
    try:
        yield started
    finally:
        for process in started:
            process.stop()


@pytest.fixture(scope="module", name="nodes")
def two_nodes(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[BrokerProcess]]:
    """Two nodes, A and B, on one Redis server: the cluster tests' usual pair."""
    with started_nodes(tmp_path_factory, redis_server, "ab") as started:
        yield started


@pytest.fixture(scope="module")
def api_nodes(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[BrokerProcess]]:
    """Nodes A and B on one Redis server, each with the management API."""
    with started_nodes(tmp_path_factory, redis_server, "ab", http=LOOPBACK_HTTP) as started:
        yield started


def registered(
    server: RedisServer, queue: str, count: int, exactly: bool = False, timeout: float = 15.0
) -> None:
    """
    The barrier before sending: wait until ``count`` consumers of ``queue`` (at
    least, or ``exactly``) are in the registry every node decides from (docs/cluster.md).
    """
    import redis

    client = redis.Redis(port=server.port)
    deadline = time.monotonic() + timeout
    try:
        while True:
            found = client.hlen(f"stompbroker:{{q:{queue}}}:consumers")
            if found == count or (found > count and not exactly):
                return
            assert time.monotonic() < deadline, "the registry never had the consumers"
            time.sleep(0.02)
    finally:
        client.close()


def unique(prefix: str) -> str:
    """:returns: ``prefix`` and a random suffix: a destination no other test uses."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def one_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of the local engine: what the cluster must match."""
    with BrokerProcess(tmp_path_factory.mktemp("one"), http=None) as broker:
        yield broker
