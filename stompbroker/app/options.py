"""
The options of ``twistd stompbroker``; the parsers of their values are
:mod:`stompbroker.app.option_values` (``parse_size`` and ``parse_heartbeat`` are
re-exported here, where callers have always found them).

:class:`Options` only parses and checks: it turns the command line into plain
values (sizes in bytes, the heart-beat pair, endpoint descriptions, strcred's
checkers, the access file read once) and refuses, with a
:class:`~twisted.python.usage.UsageError`, any value the broker could not use.
:func:`stompbroker.app.tap.makeService` builds the broker from them.  The
defaults are the library's own (``SessionConfig``, ``DeliveryPolicy``,
``Limits``), so ``twistd stompbroker`` and an embedded broker start alike.
"""

from __future__ import annotations

import sys

from twisted.cred import strcred
from twisted.cred.credentials import IAnonymous, IUsernamePassword
from twisted.python import usage

from stompbroker import __version__
from stompbroker.app.config_options import ConfigFileOptions
from stompbroker.app.edge_options import EdgeOptions
from stompbroker.app.engine_options import EngineOptions
from stompbroker.app.gc_tuning import DEFAULT_THRESHOLD
from stompbroker.app.option_values import (
    named,
    non_negative,
    non_negative_seconds,
    parse_heartbeat,
    parse_size,
    positive,
    positive_seconds,
    redelivery_limit,
    stream_destination,
)
from stompbroker.app.policy_options import PolicyOptions
from stompbroker.app.redelivery_options import RedeliveryOptions
from stompbroker.app.stream_options import StreamOptions
from stompbroker.app.vhost_options import VhostOptions
from stompbroker.app.websocket_options import WebSocketOptions
from stompbroker.broker.flow.limits import MEMORY_HIGH_SHARE, Limits
from stompbroker.broker.queueing.delivery import EXPIRED_ACTIONS, DeliveryPolicy
from stompbroker.broker.store.sqlite import SYNC_MODES
from stompbroker.logs import LEVELS
from stompbroker.protocol.resume.registry import DEFAULT_BUFFER, DEFAULT_WINDOW
from stompbroker.protocol.session import SLOW_CONSUMER_POLICIES, SessionConfig
from stompbroker.security.access import AccessControl, AccessFileError
from stompbroker.security.credentials import IBearerToken, ICertificate
from stompbroker.stats.services import DEFAULT_MONITOR_INTERVAL, DEFAULT_STATS_INTERVAL
from stompbroker.transport.websocket import WebSocketConfig

__all__ = [
    "DEFAULT_DATA_DIR",
    "DEFAULT_HTTP",
    "DEFAULT_LISTEN",
    "DEFAULT_PORT",
    "DEFAULT_SYNC",
    "Options",
    "parse_heartbeat",
    "parse_size",
]

DEFAULT_PORT = 61613
DEFAULT_LISTEN = f"tcp:{DEFAULT_PORT}:interface=127.0.0.1"
#: The web port (WebSocket, health, demo page): RabbitMQ Web-STOMP's, which its users know.
DEFAULT_HTTP = "tcp:15674:interface=127.0.0.1"
WEBSOCKET_DEFAULTS = WebSocketConfig()
#: Where persistent messages are kept, relative to the directory twistd starts in.
DEFAULT_DATA_DIR = "stompbroker-data"
DEFAULT_SYNC = "batch"

DEFAULTS = SessionConfig()
POLICY = DeliveryPolicy()
LIMITS = Limits(memory_high=0)


class Options(
    EngineOptions,
    StreamOptions,
    RedeliveryOptions,
    VhostOptions,
    PolicyOptions,
    WebSocketOptions,
    EdgeOptions,
    ConfigFileOptions,
    strcred.AuthOptionMixin,
):
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
            positive,
        ],
        [
            "max-header-length",
            None,
            DEFAULTS.max_header_length,
            "Longest header line accepted, in bytes.",
            positive,
        ],
        [
            "max-headers",
            None,
            DEFAULTS.max_headers,
            "Most headers accepted in one frame.",
            positive,
        ],
        [
            "heartbeat",
            None,
            "{},{}".format(*DEFAULTS.heartbeat),
            "Whether the server heart-beats, SEND,RECV: 0 turns a direction off; "
            "otherwise it runs at the pace the client asks, down to --heartbeat-min.",
        ],
        [
            "heartbeat-min",
            None,
            "{},{}".format(*DEFAULTS.heartbeat_min),
            "Shortest heart-beat intervals SEND,RECV in ms that a client can ask for.",
        ],
        [
            "max-connections",
            None,
            LIMITS.max_connections,
            "Most client connections open at once (0 = no limit).",
            non_negative,
        ],
        [
            "max-connections-per-address",
            None,
            LIMITS.max_connections_per_address,
            "Most client connections open at once from one client address (0 = no limit).",
            non_negative,
        ],
        [
            "max-pending-writes",
            None,
            DEFAULTS.max_pending_writes,
            "Store writes (persistent SENDs) one connection may have pending before it is "
            "read no more.",
            positive,
        ],
        [
            "max-subscriptions",
            None,
            DEFAULTS.max_subscriptions,
            "Most subscriptions one connection may have (0 = no limit).",
            non_negative,
        ],
        [
            "max-transactions",
            None,
            LIMITS.max_transactions,
            "Most transactions one connection may have open (0 = no limit).",
            non_negative,
        ],
        [
            "max-transaction-frames",
            None,
            LIMITS.max_transaction_frames,
            "Most SEND, ACK and NACK frames one transaction may hold (0 = no limit).",
            non_negative,
        ],
        [
            "connect-timeout",
            None,
            DEFAULTS.connect_timeout,
            "Seconds a client has after connecting to complete its CONNECT (0 = for ever).",
            non_negative_seconds,
        ],
        [
            "frame-timeout",
            None,
            DEFAULTS.frame_timeout,
            "Seconds a client has to complete a frame it has begun (0 = for ever).",
            non_negative_seconds,
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
            "resume-window",
            None,
            DEFAULT_WINDOW,
            "Seconds a dropped client that asked for a resumable session (CONNECT "
            "resume-token) may come back and carry on (0 = sessions are never resumed).",
            non_negative_seconds,
        ],
        [
            "resume-buffer",
            None,
            str(DEFAULT_BUFFER),
            "Bytes of topic messages kept for each dropped resumable session while it is "
            "away; past it the oldest go and the resumed CONNECTED says resume-gap:true "
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
            "Most seconds a graceful stop (SIGTERM) waits for clients to take their last frames.",
            non_negative_seconds,
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
            non_negative_seconds,
        ],
        [
            "ws-ping-timeout",
            None,
            WEBSOCKET_DEFAULTS.ping_timeout,
            "Seconds a WebSocket client has to answer a ping before it is dropped (0 = forever).",
            non_negative_seconds,
        ],
        [
            "prefetch",
            None,
            POLICY.prefetch,
            "Window of a client-ack subscription that sets no prefetch-count: most "
            "messages it holds unacknowledged.",
            positive,
        ],
        [
            "max-redeliveries",
            None,
            POLICY.max_redeliveries,
            "Times a message may be redelivered before it goes to its dead-letter queue "
            "(-1 = no limit); a subscription may set its own with max-redeliveries.",
            redelivery_limit,
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
            non_negative,
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
            "stats-stream",
            None,
            None,
            "A /stream/ destination to append the statistics to, one message per record "
            "(e.g. /stream/stompbroker.stats), for the Spark jobs to read through the "
            "stompbroker data source (default: none).",
            stream_destination,
        ],
        [
            "stats-interval",
            None,
            DEFAULT_STATS_INTERVAL,
            "Seconds between two exported statistics records of each destination.",
            positive_seconds,
        ],
        [
            "monitor-interval",
            None,
            DEFAULT_MONITOR_INTERVAL,
            "Seconds between two stats snapshots on /topic/stompbroker.stats and "
            "/queue/monitor, and the span of the rates of /stats and /metrics.",
            positive_seconds,
        ],
        [
            "gc-threshold",
            None,
            DEFAULT_THRESHOLD,
            "Net allocations between two runs of Python's garbage collector on its youngest "
            "generation (Python's own default is 700); 0 keeps Python's settings. See "
            "docs/performance.md.",
            non_negative,
        ],
        [
            "log-level",
            None,
            "info",
            f"Lowest level of the broker's log events: {', '.join(LEVELS)}.",
        ],
    ]
    optParameters = named(optParameters)

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

    # twistd's --help prints an opt_ method's docstring as it is, wrapped to the
    # terminal: a docstring broken over lines would show its indentation, so the
    # long ones stay on one line.

    def opt_port(self, port: str) -> None:
        """Listen on this TCP port on 127.0.0.1 (shorthand for --listen tcp:PORT:interface=127.0.0.1)."""  # noqa: E501
        if not port.isdigit():
            raise usage.UsageError(f"--port takes a port number, got {port!r}")
        self["listen"].append(f"tcp:{port}:interface=127.0.0.1")

    opt_p = opt_port

    def opt_listen(self, description: str) -> None:
        """Listen on a Twisted server endpoint, e.g. tcp:61613, ssl:61614:privateKey=key.pem:certKey=cert.pem, or mtls:...:caCerts=ca.pem to verify client certificates (for --auth cert) (repeatable)."""  # noqa: E501
        self["listen"].append(description)

    def opt_http(self, description: str) -> None:
        """Serve the web port (STOMP over WebSocket at /ws and /stomp, /healthz, /stats, /metrics, /dashboard, the management API at /api/ and console at /console, a demo page at /) on a Twisted server endpoint, e.g. tcp:15674 or ssl:15673:privateKey=key.pem:certKey=cert.pem (repeatable; 'none' turns it off)."""  # noqa: E501
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
        self["resume-buffer"] = parse_size(self["resume-buffer"], "resume-buffer")
        if self["resume-buffer"] < 1:
            raise usage.UsageError("--resume-buffer must be at least 1 byte")
        self["memory-high"] = parse_size(self["memory-high"], "memory-high")
        low = self["memory-low"]
        self["memory-low"] = 0 if low is None else parse_size(low, "memory-low")
        if self["memory-low"] and self["memory-low"] >= self["memory-high"]:
            raise usage.UsageError("--memory-low must be below --memory-high")

    def opt_version(self) -> None:
        """Print the version and exit."""
        print(f"stompbroker {__version__}")
        raise SystemExit(0)

    def opt_auth(self, description: str) -> None:
        """Check CONNECT's login and passcode: passwd:FILE, jwt:jwks=FILE:audience=AUD, cert, memory:USER:PASS, unix, ... (repeatable; --help-auth lists them)."""  # noqa: E501
        try:
            super().opt_auth(description)
            self.setdefault("auth-kinds", []).append(description.split(":", 1)[0])
        except usage.UsageError as error:
            # Only the kind: the rest may hold a password (memory:USER:PASS).
            kind = description.split(":", 1)[0]
            reason = str(error).removeprefix("Unexpected error: ")
            raise usage.UsageError(f"--auth {kind}: {reason}") from None

    def opt_allow_anonymous(self) -> None:
        """With --auth, also let in clients that send no login."""
        self["allow-anonymous"] = True

    def parseOptions(self, options: list[str] | None = None) -> None:
        """Parse, keeping the arguments as given (``--workers`` hands them to its workers)."""
        self.argv = list(sys.argv[1:] if options is None else options)
        super().parseOptions(self.argv)

    def postOptions(self) -> None:
        self["heartbeat"] = parse_heartbeat(self["heartbeat"])
        self["heartbeat-min"] = parse_heartbeat(self["heartbeat-min"], "heartbeat-min")
        self._check_security()
        self._check_limits()
        self.check_engine()
        self.check_streams(parse_size)
        self.check_redelivery()
        self.check_vhosts()
        self.check_policies()
        self.check_websocket()
        self.check_edge()
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
        self.check_workers([*self["listen"], *self["http"]])
