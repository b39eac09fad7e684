"""
The table of ``twistd stompbroker``'s own options: each option's name, default,
help and the parser of its value, as twistd's ``optParameters`` and
``optFlags`` rows.

The defaults are the library's own (``SessionConfig``, ``DeliveryPolicy``,
``Limits``), so ``twistd stompbroker`` and an embedded broker start alike.  The
options of a feature with a module of its own (``engine_options``,
``stream_options``, ...) are in that module; the checks across options, and
the options that are methods (``--listen``, ``--auth``, ...), are
:class:`stompbroker.app.options.Options`'s.
"""

from __future__ import annotations

from typing import Any

from stompbroker.app.gc_tuning import DEFAULT_THRESHOLD
from stompbroker.app.option_values import (
    named,
    non_negative,
    non_negative_seconds,
    positive,
    positive_seconds,
    redelivery_limit,
    stream_destination,
)
from stompbroker.broker.flow.broker_limits import MEMORY_HIGH_SHARE, Limits
from stompbroker.broker.queueing.delivery import EXPIRED_ACTIONS, DeliveryPolicy
from stompbroker.logs import LEVELS
from stompbroker.protocol.resume.resume_book import DEFAULT_BUFFER, DEFAULT_WINDOW
from stompbroker.protocol.session import SLOW_CONSUMER_POLICIES, SessionConfig
from stompbroker.stats.sampling_services import DEFAULT_MONITOR_INTERVAL, DEFAULT_STATS_INTERVAL
from stompbroker.transport.websocket import WebSocketConfig

__all__ = ["DEFAULT_DATA_DIR", "DEFAULT_SYNC", "FLAGS", "PARAMETERS"]

#: Where persistent messages are kept, relative to the directory twistd starts in.
DEFAULT_DATA_DIR = "stompbroker-data"
DEFAULT_SYNC = "batch"

DEFAULTS = SessionConfig()
POLICY = DeliveryPolicy()
LIMITS = Limits(memory_high=0)
WEBSOCKET_DEFAULTS = WebSocketConfig()

#: The options that take a value: name, short name, default, help, parser.
PARAMETERS: list[Any] = named(
    [
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
            "disk-free-limit",
            None,
            "50M",
            "Room the message store's disk keeps free: below it, connections that publish "
            "persistent messages are held until there is room again: bytes (K, M, G "
            "allowed) or a share of the data directory's filesystem such as 5% (0 = off).",
        ],
        [
            "queue-memory",
            None,
            None,
            "Memory the queues of the message store may hold their messages in, together; "
            "past it a queue keeps what arrives (persistent or not) on disk only and reads "
            "it back as it drains "
            "(K, M, G allowed; default: 25% of --memory-high).",
        ],
        [
            "read-ahead",
            None,
            LIMITS.read_ahead,
            "Messages a queue that pages keeps in memory, and reads from the store at once.",
            positive,
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
)

#: The flags: name, short name, help.
FLAGS: list[list[Any]] = [
    [
        "persistent-queues",
        None,
        "Make every message sent to a /queue/ persistent, whatever its persistent header says.",
    ],
]
