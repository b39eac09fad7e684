"""
``twistd stompbroker``: command-line options, and the one place that wires the broker.

:class:`Options` only parses; :func:`makeService` builds the broker and one
listening service per ``--listen`` endpoint, all feeding that broker, under a
:class:`BrokerService` that starts the listeners only once the broker has
recovered its persistent messages from the data directory.
"""

from __future__ import annotations

import atexit
import os
import resource
import signal
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import MultiService, Service
from twisted.cred import strcred
from twisted.cred.credentials import IAnonymous, IUsernamePassword
from twisted.internet import endpoints
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.python import usage
from twisted.python.failure import Failure

from stompbroker import __version__
from stompbroker.app.gc_tuning import DEFAULT_THRESHOLD, CollectorTuning
from stompbroker.broker.delivery import EXPIRED_ACTIONS, DeliveryPolicy
from stompbroker.broker.flow import physical_memory
from stompbroker.broker.service import MEMORY_HIGH_SHARE, Broker, Limits
from stompbroker.broker.store.base import StoreError
from stompbroker.broker.store.sqlite import SYNC_MODES, SQLiteStore
from stompbroker.logs import LEVELS, logger, set_level
from stompbroker.protocol.session import SLOW_CONSUMER_POLICIES, SessionConfig
from stompbroker.security.access import AccessControl, AccessFileError
from stompbroker.security.auth import Authenticator, make_portal
from stompbroker.security.credentials import IBearerToken, ICertificate
from stompbroker.stats.export import StatsExporter
from stompbroker.stats.model import StatsModel
from stompbroker.stats.services import (
    DEFAULT_MONITOR_INTERVAL,
    DEFAULT_STATS_INTERVAL,
    LiveStats,
    StatsExport,
)
from stompbroker.transport.tcp import stomp_server_factory
from stompbroker.transport.websocket import WebSocketConfig
from stompbroker.web.site import WebSite, web_root

DEFAULT_PORT = 61613
DEFAULT_LISTEN = f"tcp:{DEFAULT_PORT}:interface=127.0.0.1"
#: The web port (WebSocket, health, demo page): RabbitMQ Web-STOMP's, which its users know.
DEFAULT_HTTP = "tcp:15674:interface=127.0.0.1"
WEBSOCKET_DEFAULTS = WebSocketConfig()
#: Where persistent messages are kept, relative to the directory twistd starts in.
DEFAULT_DATA_DIR = "stompbroker-data"
DEFAULT_SYNC = "batch"

log = logger("stompbroker.app.tap")
DEFAULTS = SessionConfig()
POLICY = DeliveryPolicy()
LIMITS = Limits(memory_high=0)
#: Files the broker may need open besides its client connections.
SPARE_DESCRIPTORS = 256
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be a positive integer, got {text!r}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be 0 or more, got {text!r}")
    return value


def _redelivery_limit(text: str) -> int:
    value = int(text)
    if value < -1:
        raise ValueError(f"must be 0 or more, or -1 for no limit, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise ValueError(f"must be more than 0 seconds, got {text!r}")
    return value


def _non_negative_seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value < float("inf"):
        raise ValueError(f"must be 0 or more seconds, got {text!r}")
    return value


def parse_size(text: str, option: str) -> int:
    """
    :param text: bytes, with an optional unit ``K``, ``M``, ``G`` or ``T`` (powers
        of 1024), or a percentage of the machine's memory such as ``40%``.
    :param option: the option's name, for the error message.
    :returns: the size in bytes.
    :raises usage.UsageError: for anything else.
    """
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    try:
        if cleaned.endswith("%"):
            share = float(cleaned[:-1]) / 100
            if not 0 <= share <= 1:
                raise ValueError(text)
            return int(physical_memory() * share)
        unit = cleaned[-1:] if cleaned[-1:] in _SIZE_UNITS else ""
        value = float(cleaned[: len(cleaned) - len(unit)])
        if not 0 <= value < float("inf"):
            raise ValueError(text)
        return int(value * _SIZE_UNITS[unit])
    except ValueError:
        raise usage.UsageError(
            f"--{option} takes bytes (with K, M, G or T) or a share of memory such as 40%,"
            f" got {text!r}"
        ) from None


def parse_heartbeat(text: str) -> tuple[int, int]:
    """
    :param text: ``"SEND,RECV"`` in milliseconds.
    :returns: the pair of integers.
    :raises usage.UsageError: when the text is not two non-negative integers.
    """
    try:
        send, receive = (int(part) for part in text.split(","))
    except ValueError:
        raise usage.UsageError(f"--heartbeat takes SEND,RECV in ms, got {text!r}") from None
    if send < 0 or receive < 0:
        raise usage.UsageError(f"--heartbeat values must be 0 or more, got {text!r}")
    return (send, receive)


class Options(usage.Options, strcred.AuthOptionMixin):
    """The options of ``twistd stompbroker``; ``--auth`` comes from ``strcred``."""

    supportedInterfaces = (IUsernamePassword, IAnonymous, ICertificate)

    synopsis = "[options]"
    longdesc = (
        "Run a STOMP 1.0/1.1/1.2 broker. Without --port or --listen it listens on "
        f"{DEFAULT_LISTEN}; without --http its web port (STOMP over WebSocket, health, statistics, "
        f"a dashboard, a demo page) is {DEFAULT_HTTP}. Every listener feeds the same broker."
    )

    optParameters = [
        [
            "max-frame-size",
            None,
            DEFAULTS.max_frame_size,
            "Largest frame accepted, headers and body, in bytes.",
            _positive,
        ],
        [
            "max-header-length",
            None,
            DEFAULTS.max_header_length,
            "Longest header line accepted, in bytes.",
            _positive,
        ],
        [
            "max-headers",
            None,
            DEFAULTS.max_headers,
            "Most headers accepted in one frame.",
            _positive,
        ],
        [
            "heartbeat",
            None,
            "{},{}".format(*DEFAULTS.heartbeat),
            "The server's heart-beat offer SEND,RECV in ms: how often it can send, "
            "and how often it wants to hear from clients (0 = never).",
        ],
        [
            "max-connections",
            None,
            LIMITS.max_connections,
            "Most client connections open at once (0 = no limit).",
            _non_negative,
        ],
        [
            "max-connections-per-address",
            None,
            LIMITS.max_connections_per_address,
            "Most client connections open at once from one client address (0 = no limit).",
            _non_negative,
        ],
        [
            "max-subscriptions",
            None,
            DEFAULTS.max_subscriptions,
            "Most subscriptions one connection may have (0 = no limit).",
            _non_negative,
        ],
        [
            "max-transactions",
            None,
            LIMITS.max_transactions,
            "Most transactions one connection may have open (0 = no limit).",
            _non_negative,
        ],
        [
            "max-transaction-frames",
            None,
            LIMITS.max_transaction_frames,
            "Most SEND, ACK and NACK frames one transaction may hold (0 = no limit).",
            _non_negative,
        ],
        [
            "connect-timeout",
            None,
            DEFAULTS.connect_timeout,
            "Seconds a client has after connecting to complete its CONNECT (0 = for ever).",
            _non_negative_seconds,
        ],
        [
            "frame-timeout",
            None,
            DEFAULTS.frame_timeout,
            "Seconds a client has to complete a frame it has begun (0 = for ever).",
            _non_negative_seconds,
        ],
        [
            "slow-consumer",
            None,
            DEFAULTS.slow_consumer_policy,
            "What happens when a client does not read its topic messages fast enough and "
            f"its buffer is full: {', '.join(SLOW_CONSUMER_POLICIES)}.",
        ],
        [
            "slow-consumer-buffer",
            None,
            str(DEFAULTS.slow_consumer_buffer),
            "Bytes of topic messages kept for a client that does not read fast enough "
            "(K, M, G allowed).",
        ],
        [
            "memory-high",
            None,
            f"{MEMORY_HIGH_SHARE:.0%}",
            "Memory in use above which the broker stops reading from publishers: bytes "
            "(K, M, G allowed) or a share of the machine's memory (0 = off).",
        ],
        [
            "memory-low",
            None,
            None,
            "Memory in use below which it reads from them again (default: 80% of --memory-high).",
        ],
        [
            "shutdown-timeout",
            None,
            LIMITS.shutdown_timeout,
            "Most seconds a graceful stop (SIGTERM) waits for clients to take their last "
            "frames.",
            _non_negative_seconds,
        ],
        [
            "access",
            None,
            None,
            "A TOML access file giving users and groups read, write and admin rights on "
            "destinations; reloaded on SIGHUP (default: everything allowed).",
        ],
        [
            "ws-ping-interval",
            None,
            WEBSOCKET_DEFAULTS.ping_interval,
            "Seconds between the server's WebSocket pings (0 = no pings).",
            _non_negative_seconds,
        ],
        [
            "ws-ping-timeout",
            None,
            WEBSOCKET_DEFAULTS.ping_timeout,
            "Seconds a WebSocket client has to answer a ping before it is dropped (0 = forever).",
            _non_negative_seconds,
        ],
        [
            "prefetch",
            None,
            POLICY.prefetch,
            "Window of a client-ack subscription that sets no prefetch-count: most "
            "messages it holds unacknowledged.",
            _positive,
        ],
        [
            "max-redeliveries",
            None,
            POLICY.max_redeliveries,
            "Times a message may be redelivered before it goes to its dead-letter queue "
            "(-1 = no limit); a subscription may set its own with max-redeliveries.",
            _redelivery_limit,
        ],
        [
            "dead-letter-prefix",
            None,
            POLICY.dead_letter_prefix,
            "Dead letters of /queue/NAME (or /topic/NAME) go to /queue/PREFIXNAME.",
        ],
        [
            "expired",
            None,
            POLICY.expired,
            f"What happens to expired messages: {' or '.join(EXPIRED_ACTIONS)}.",
        ],
        [
            "ttl",
            None,
            POLICY.ttl,
            "Time to live in ms of messages that set no expires or expiration (0 = none).",
            _non_negative,
        ],
        [
            "data-dir",
            None,
            DEFAULT_DATA_DIR,
            "Directory of the message store (SQLite), which keeps persistent messages and "
            "durable subscriptions across restarts; made if missing; 'none' keeps "
            "everything in memory only.",
        ],
        [
            "sync",
            None,
            DEFAULT_SYNC,
            "How the message store reaches the disk: always (commit each group as soon "
            "as the writer is free), batch (the same promise, fuller groups under load) "
            "or off (acknowledge before writing; a crash can lose the last moments).",
        ],
        [
            "stats-dir",
            None,
            None,
            "Directory to append the broker's statistics to, as hourly JSON Lines files for "
            "the Spark jobs (sparkjobs/); made if missing (default: no export).",
        ],
        [
            "stats-interval",
            None,
            DEFAULT_STATS_INTERVAL,
            "Seconds between two exported statistics records of each destination.",
            _positive_seconds,
        ],
        [
            "monitor-interval",
            None,
            DEFAULT_MONITOR_INTERVAL,
            "Seconds between two stats snapshots on /topic/stompbroker.stats and "
            "/queue/monitor, and the span of the rates of /stats and /metrics.",
            _positive_seconds,
        ],
        [
            "gc-threshold",
            None,
            DEFAULT_THRESHOLD,
            "Net allocations between two runs of Python's garbage collector on its youngest "
            "generation (Python's own default is 700); 0 keeps Python's settings. See "
            "docs/performance.md.",
            _non_negative,
        ],
        [
            "log-level",
            None,
            "info",
            f"Lowest level of the broker's log events: {', '.join(LEVELS)}.",
        ],
    ]

    optFlags = [
        [
            "persistent-queues",
            None,
            "Make every message sent to a /queue/ persistent, whatever its persistent header says.",
        ],
    ]

    def __init__(self) -> None:
        super().__init__()
        self["listen"] = []
        self["http"] = []

    def opt_port(self, port: str) -> None:
        """Listen on this TCP port on 127.0.0.1 (shorthand for --listen tcp:PORT:interface=127.0.0.1)."""
        if not port.isdigit():
            raise usage.UsageError(f"--port takes a port number, got {port!r}")
        self["listen"].append(f"tcp:{port}:interface=127.0.0.1")

    opt_p = opt_port

    def opt_listen(self, description: str) -> None:
        """Listen on a Twisted server endpoint, e.g. tcp:61613, ssl:61614:privateKey=key.pem:certKey=cert.pem, or mtls:...:caCerts=ca.pem to verify client certificates (for --auth cert) (repeatable)."""
        self["listen"].append(description)

    def opt_http(self, description: str) -> None:
        """Serve the web port (STOMP over WebSocket at /ws and /stomp, /healthz, /stats, /metrics, /dashboard, a demo page at /) on a Twisted server endpoint, e.g. tcp:15674 or ssl:15673:privateKey=key.pem:certKey=cert.pem (repeatable; 'none' turns it off)."""
        self["http"].append(description)

    def _check_security(self) -> None:
        """Check --auth, --allow-anonymous and --access, and read the access file."""
        self.setdefault("allow-anonymous", False)
        if self["allow-anonymous"] and not self.get("credCheckers"):
            raise usage.UsageError(
                "--allow-anonymous goes with --auth; without --auth everyone is let in"
            )
        self["access-control"] = None
        if self["access"] is not None:
            try:
                self["access-control"] = AccessControl(self["access"])
            except AccessFileError as error:
                raise usage.UsageError(f"--access: {error}") from None
        checkers = self.get("credCheckers", [])
        if self["access-control"] is None and any(
            IBearerToken in checker.credentialInterfaces for checker in checkers
        ):
            # Tokens carry their rights (scopes), which hold even without an access file.
            self["access-control"] = AccessControl()

    def _check_limits(self) -> None:
        """Check the slow-consumer policy, and read the sizes."""
        if self["slow-consumer"] not in SLOW_CONSUMER_POLICIES:
            raise usage.UsageError(
                f"--slow-consumer must be one of {', '.join(SLOW_CONSUMER_POLICIES)},"
                f" got {self['slow-consumer']!r}"
            )
        buffer = parse_size(self["slow-consumer-buffer"], "slow-consumer-buffer")
        if buffer < 1:
            raise usage.UsageError("--slow-consumer-buffer must be at least 1 byte")
        self["slow-consumer-buffer"] = buffer
        self["memory-high"] = parse_size(self["memory-high"], "memory-high")
        low = self["memory-low"]
        self["memory-low"] = 0 if low is None else parse_size(low, "memory-low")
        if self["memory-low"] and self["memory-low"] >= self["memory-high"]:
            raise usage.UsageError("--memory-low must be below --memory-high")

    def opt_version(self) -> None:
        """Print the version and exit."""
        print(f"stompbroker {__version__}")
        raise SystemExit(0)

    def opt_allow_anonymous(self) -> None:
        """With --auth, also let in clients that send no login."""
        self["allow-anonymous"] = True

    def postOptions(self) -> None:
        self["heartbeat"] = parse_heartbeat(self["heartbeat"])
        self._check_security()
        self._check_limits()
        if self["log-level"] not in LEVELS:
            raise usage.UsageError(
                f"--log-level must be one of {', '.join(LEVELS)}, got {self['log-level']!r}"
            )
        if self["expired"] not in EXPIRED_ACTIONS:
            raise usage.UsageError(
                f"--expired must be {' or '.join(EXPIRED_ACTIONS)}, got {self['expired']!r}"
            )
        if self["sync"] not in SYNC_MODES:
            raise usage.UsageError(
                f"--sync must be one of {', '.join(SYNC_MODES)}, got {self['sync']!r}"
            )
        if not self["data-dir"]:
            raise usage.UsageError("--data-dir needs a directory, or none")
        if self["data-dir"] == "none" and self["persistent-queues"]:
            raise usage.UsageError(
                "--persistent-queues needs a message store; it cannot go with --data-dir none"
            )
        prefix = self["dead-letter-prefix"]
        if not prefix or "/" in prefix:
            raise usage.UsageError(
                f"--dead-letter-prefix must be non-empty and hold no '/', got {prefix!r}"
            )
        if not self["listen"]:
            self["listen"] = [DEFAULT_LISTEN]
        if not self["http"]:
            self["http"] = [DEFAULT_HTTP]
        elif "none" in self["http"]:
            if len(self["http"]) > 1:
                raise usage.UsageError(
                    "--http none turns the web port off; it takes no other --http"
                )
            self["http"] = []


def makeService(options: Options, reactor: Any | None = None) -> MultiService:
    """
    Build the broker, its STOMP listeners and its web port from parsed options.

    :param options: parsed :class:`Options`.
    :param reactor: the reactor to listen on and time with; the global one by default.
    :returns: a :class:`BrokerService` holding the broker and one listening
        service per ``--listen`` and per ``--http`` endpoint; the web ones are
        named ``http ENDPOINT`` and serve one :class:`~stompbroker.web.site.WebSite`.
        Nothing touches the data directory until the service starts (after
        twistd has daemonized).
    """
    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    set_level(options["log-level"])
    policy = DeliveryPolicy(
        prefetch=options["prefetch"],
        max_redeliveries=options["max-redeliveries"],
        dead_letter_prefix=options["dead-letter-prefix"],
        expired=options["expired"],
        ttl=options["ttl"],
    )
    store = None
    if options["data-dir"] != "none":
        data_dir = Path(options["data-dir"]).absolute()
        # The broker closes the store when twistd stops it, after its clients.
        store = SQLiteStore(
            data_dir, reactor=reactor, sync=options["sync"], close_at_shutdown=False
        )
    broker = Broker(
        reactor,
        limits=Limits(
            max_connections=options["max-connections"],
            max_connections_per_address=options["max-connections-per-address"],
            max_transactions=options["max-transactions"],
            max_transaction_frames=options["max-transaction-frames"],
            memory_high=options["memory-high"],
            memory_low=options["memory-low"],
            shutdown_timeout=options["shutdown-timeout"],
        ),
        policy=policy,
        store=store,
        persistent_queues=options["persistent-queues"],
    )
    top = BrokerService(broker, on_failure=lambda failure: exit_with_error(reactor, failure))
    config = SessionConfig(
        server_name=f"stompbroker/{__version__}",
        heartbeat=options["heartbeat"],
        max_frame_size=options["max-frame-size"],
        max_headers=options["max-headers"],
        max_header_length=options["max-header-length"],
        authenticator=_authenticator(options, reactor),
        access=options["access-control"],
        max_subscriptions=options["max-subscriptions"],
        connect_timeout=options["connect-timeout"],
        frame_timeout=options["frame-timeout"],
        slow_consumer_policy=options["slow-consumer"],
        slow_consumer_buffer=options["slow-consumer-buffer"],
    )
    if options["access"] is not None:
        ReloadOnHangup(options["access-control"], reactor).setServiceParent(top)
    raise_descriptor_limit(options["max-connections"])
    factory = stomp_server_factory(broker, reactor, config)
    for description in options["listen"]:
        _listen(top, reactor, f"stomp {description}", description, factory)
    live = _add_stats(top, broker, reactor, options)
    if options["gc-threshold"]:
        # A child like the listeners: it starts once recovery is over.
        CollectorTuning(options["gc-threshold"]).setServiceParent(top)
    if options["http"]:
        websocket = WebSocketConfig(
            ping_interval=options["ws-ping-interval"], ping_timeout=options["ws-ping-timeout"]
        )
        root = web_root(broker, reactor, config, websocket=websocket, stats=live)
        site = WebSite(root, reactor=reactor)
        for description in options["http"]:
            _listen(top, reactor, f"http {description}", description, site)
    return top


class BrokerService(MultiService):
    """
    The broker and the services that serve it: the broker starts first, the
    others (its listeners) once it has recovered what its store holds, so that
    no client sees a half-rebuilt broker.

    :param broker: the :class:`~stompbroker.broker.service.Broker`; it becomes
        the first child, named ``broker``.
    :param on_failure: called with the Failure when the broker cannot recover,
        or a listener cannot start after it; twistd's stops the process.
    :raises SystemExit: from :meth:`startService`, with the store's message, when
        the data directory cannot be used (locked, damaged, not writable).
    """

    def __init__(self, broker: Broker, on_failure: Callable[[Failure], None]) -> None:
        super().__init__()
        self.broker = broker
        self._on_failure = on_failure
        broker.setServiceParent(self)

    def privilegedStartService(self) -> None:
        """
        Do nothing for the listeners yet: they bind in :meth:`startService`, once
        the broker is ready (so a port below 1024 needs a user that may bind it).
        """
        Service.privilegedStartService(self)
        self.broker.privilegedStartService()

    def startService(self) -> None:
        """Start the broker; start the others once it is ready."""
        Service.startService(self)
        try:
            self.broker.startService()
        except StoreError as error:
            log.critical("cannot use the message store: {error}", error=str(error))
            raise SystemExit(f"stompbroker: {error}") from error
        ready: Deferred[None] = self.broker.when_ready()
        ready.addCallback(self._start_the_others).addErrback(self._on_failure)

    def _start_the_others(self, ready: None) -> None:
        if not self.running:
            return
        for service in self:
            if service is not self.broker:
                service.startService()

    def stopService(self) -> Deferred[Any]:
        """Stop, in reverse order, every child that was started; the broker last."""
        Service.stopService(self)
        stopping = [
            maybeDeferred(service.stopService) for service in reversed(list(self)) if service.running
        ]
        return DeferredList(stopping)


def exit_with_error(reactor: Any, failure: Failure) -> None:
    """
    Stop twistd with exit status 1, after logging why.

    twistd has no exit status of its own once its reactor runs: the process ends
    with 1 from an ``atexit`` hook, after twistd has cleaned up as usual.
    """
    log.critical("stompbroker cannot start: {error}", error=str(failure.value))
    atexit.register(_exit, 1)
    reactor.callWhenRunning(reactor.stop)


def _exit(status: int) -> None:
    """End the process with ``status``, once what it printed is out."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _authenticator(options: Options, reactor: Any) -> Authenticator | None:
    """
    :returns: what sessions log clients in with: a portal over the ``--auth``
        checkers, or with ``--access`` alone one that lets everyone in
        anonymously (the access file's ``[anonymous]`` rules then apply);
        ``None`` without either, so that CONNECT costs nothing more.
    """
    checkers = options.get("credCheckers", [])
    if not checkers and options["access-control"] is None:
        return None
    return Authenticator(make_portal(checkers, options["allow-anonymous"]), reactor)


class ReloadOnHangup(Service):
    """
    Reloads the access file on SIGHUP; a file that became invalid is logged and
    the rules in force stay.

    :param access: the :class:`~stompbroker.security.access.AccessControl` sessions check.
    :param reactor: runs the reload in the reactor thread, not in the signal handler.
    """

    name = "access reload"

    def __init__(self, access: AccessControl, reactor: Any) -> None:
        self.access = access
        self._reactor = reactor
        self._previous: Any = None

    def startService(self) -> None:
        super().startService()
        self._previous = signal.signal(signal.SIGHUP, self._hangup)

    def stopService(self) -> None:
        super().stopService()
        signal.signal(signal.SIGHUP, self._previous or signal.SIG_DFL)

    def _hangup(self, signum: int, frame: types.FrameType | None) -> None:
        self._reactor.callFromThread(self.reload)

    def reload(self) -> None:
        """Read the access file again, keeping the old rules if it is invalid."""
        try:
            self.access.reload()
        except AccessFileError as error:
            log.error("access file not reloaded, the old rules stay: {error}", error=str(error))
            return
        log.info("access file {path} reloaded", path=self.access.path)


def raise_descriptor_limit(connections: int) -> int:
    """
    Let the process open enough files for ``connections`` clients, up to the hard limit.

    :param connections: the most client connections; 0 means as many as allowed.
    :returns: the soft limit now in force.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if not connections else connections + SPARE_DESCRIPTORS
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and wanted > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = wanted
    if connections and soft != resource.RLIM_INFINITY and soft < connections + SPARE_DESCRIPTORS:
        log.warn(
            "the process may open {limit} files: fewer than --max-connections {connections}"
            " will fit",
            limit=soft,
            connections=connections,
        )
    return soft


def _add_stats(top: MultiService, broker: Broker, reactor: Any, options: Options) -> LiveStats:
    """
    Add the statistics services to ``top``: the live one, and with ``--stats-dir`` the export.

    :returns: the live service, which the web port's stats pages read.
    """
    model = StatsModel(broker, reactor)
    live = LiveStats(model, options["monitor-interval"])
    live.setServiceParent(top)
    if options["stats-dir"] is not None:
        exporter = StatsExporter(Path(options["stats-dir"]).absolute(), reactor.seconds)
        StatsExport(model, exporter, options["stats-interval"]).setServiceParent(top)
    return live


def _listen(top: MultiService, reactor: Any, name: str, description: str, factory: Any) -> None:
    """Add a service to ``top`` that listens on the endpoint ``description`` with ``factory``."""
    endpoint = endpoints.serverFromString(reactor, description)
    listener = StreamServerEndpointService(endpoint, factory)
    listener._raiseSynchronously = True
    listener.setName(name)
    listener.setServiceParent(top)
