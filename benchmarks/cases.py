"""
What a benchmark run can be: the scenarios by name and kind, the figures each is
judged by, and the :class:`Settings`, :class:`Case` and :class:`Target` of one run.

Apart from :mod:`benchmarks.scenarios`, which runs them, because the command
line, the report and the cluster set-up need these names and records without
the machinery of a run.
"""

from __future__ import annotations

from attrs import frozen

from benchmarks.connection import Endpoint

#: In the order a full run takes them: ``idle`` first, because a broker's
#: resident memory rarely shrinks, so growth per connection is only visible
#: on a broker that has not been busy yet.
SCENARIOS = (
    "idle",
    "fanout",
    "selector-fanout",
    "ws-fanout",
    "queue",
    "persistent",
    "queue-selectors",
    "queue-groups",
    "queue-priorities",
    "latency",
    "stream",
)
#: The scenarios of destination features, run only when named: ``stream`` is
#: stompbroker's own destination kind (other brokers' streams are reached otherwise).
FEATURE_SCENARIOS = frozenset(
    {"selector-fanout", "queue-selectors", "queue-groups", "queue-priorities", "stream"}
)
#: What a run without named scenarios runs: the feature scenarios only on request.
DEFAULT_SCENARIOS = tuple(scenario for scenario in SCENARIOS if scenario not in FEATURE_SCENARIOS)
#: Scenarios across two nodes of the redis engine (publishers on one, receivers
#: on the other; :mod:`benchmarks.cluster` starts them): run only when named.
CLUSTER_SCENARIOS = (
    "cluster-fanout",
    "cluster-queue",
    "cluster-queue-selectors",
    "cluster-queue-groups",
    "cluster-queue-priorities",
)
ACK_MODES = ("auto", "client", "client-individual")
TOPIC_SCENARIOS = frozenset({"fanout", "selector-fanout", "ws-fanout", "latency", "cluster-fanout"})
#: ``selector-fanout``: every other subscription carries this two-term selector,
#: and every message the headers that make it TRUE, so each subscriber still gets
#: every message (the exactly-once check holds) and the figure is ``fanout``'s
#: plus what evaluating the selectors costs.
SELECTOR: tuple[tuple[str, str], ...] = (("selector", "type = 'a' AND n > 3"),)
SELECTED_HEADERS: tuple[tuple[str, str], ...] = (("type", "a"), ("n", "5"))
QUEUE_SCENARIOS = frozenset(
    {
        "queue",
        "persistent",
        "queue-selectors",
        "queue-groups",
        "queue-priorities",
        "cluster-queue",
        "cluster-queue-selectors",
        "cluster-queue-groups",
        "cluster-queue-priorities",
    }
)
#: Queue scenarios whose every other consumer has :data:`SELECTOR` (which every
#: message satisfies, so the exactly-once check holds): the cost of deciding by selectors.
SELECTING_QUEUE_SCENARIOS = frozenset({"queue-selectors", "cluster-queue-selectors"})
#: How many message groups ``queue-groups`` spreads its messages over.
GROUPS = 100
#: The header that varies with ``seq`` in a scenario that has one (see SendTemplate).
VARYING: dict[str, tuple[str, str, int]] = {
    "queue-groups": ("JMSXGroupID", "g", GROUPS),
    "queue-priorities": ("priority", "", 10),
    "cluster-queue-groups": ("JMSXGroupID", "g", GROUPS),
    "cluster-queue-priorities": ("priority", "", 10),
}
#: The figures each scenario is judged by, the headline first, and whether more is better.
HEADLINE: dict[str, tuple[tuple[str, bool], ...]] = {
    "fanout": (("deliveries_per_s", True),),
    "selector-fanout": (("deliveries_per_s", True),),
    "ws-fanout": (("deliveries_per_s", True),),
    "queue": (("msgs_per_s", True),),
    "persistent": (("msgs_per_s", True),),
    "queue-selectors": (("msgs_per_s", True),),
    "queue-groups": (("msgs_per_s", True),),
    "queue-priorities": (("msgs_per_s", True),),
    "cluster-fanout": (("deliveries_per_s", True),),
    "cluster-queue": (("msgs_per_s", True),),
    "cluster-queue-selectors": (("msgs_per_s", True),),
    "cluster-queue-groups": (("msgs_per_s", True),),
    "cluster-queue-priorities": (("msgs_per_s", True),),
    "latency": (("p99_ms", False), ("p50_ms", False)),
    "idle": (("held", True), ("rss_per_conn_kb", False)),
    "stream": (("append_msgs_per_s", True), ("replay_msgs_per_s", True)),
}


@frozen
class Settings:
    """
    How hard and how long to push; the command line's options.

    :ivar size: body bytes per message.
    :ivar duration: seconds of publishing, at most.
    :ivar max_count: messages per run, at most (split among producers).
    :ivar receipt_every: a receipt every this many SENDs.
    :ivar window: receipts outstanding at most.
    :ivar stall: seconds without progress that end a run as stalled.
    :ivar drain: seconds to wait for deliveries once publishing ended.
    :ivar procs: receiver processes (at most one per connection).
    :ivar read_delay: seconds a receiver waits after short reads; 0 for none.
    :ivar rate: messages per second in the latency scenario.
    :ivar warmup: seconds at the start of the latency scenario left out of the figures.
    :ivar connections: connections the idle scenario opens.
    :ivar hold: seconds the idle scenario holds them before measuring.
    :ivar prefetch: ``prefetch-count`` and ``activemq.prefetchSize`` for consumers, if set.
    :ivar setup_timeout: bound on each step of setting up connections.
    """

    size: int = 117
    duration: float = 10.0
    max_count: int = 5_000_000
    receipt_every: int = 100
    window: int = 4
    stall: float = 5.0
    drain: float = 10.0
    procs: int = 2
    read_delay: float = 0.002
    rate: int = 10_000
    warmup: float = 1.0
    connections: int = 5000
    hold: float = 3.0
    prefetch: int | None = None
    setup_timeout: float = 20.0


@frozen
class Case:
    """
    One configuration of one scenario.

    :ivar scenario: one of :data:`SCENARIOS`.
    :ivar subscribers: topic subscribers (``fanout``, ``ws-fanout``, ``latency``).
    :ivar producers: queue producers.
    :ivar consumers: queue consumers.
    :ivar ack: the consumers' ack mode.
    """

    scenario: str
    subscribers: int = 1
    producers: int = 1
    consumers: int = 1
    ack: str = "auto"

    @property
    def label(self) -> str:
        """:returns: a short name for tables, e.g. ``queue 4x4 client-individual``."""
        if self.scenario in TOPIC_SCENARIOS:
            return f"{self.scenario} {self.subscribers} sub"
        if self.scenario in QUEUE_SCENARIOS:
            return f"{self.scenario} {self.producers}x{self.consumers} {self.ack}"
        return self.scenario


@frozen
class Target:
    """
    A broker under test.

    :ivar name: how tables and JSON lines call it (``stompbroker``, ``other``).
    :ivar endpoint: how to reach it.
    :ivar pid: its process id, for its CPU and memory, when known.
    :ivar publish_endpoint: where publishers connect, if not to ``endpoint``
        (the cluster scenarios: another node of the same broker).
    :ivar parts: every process of the broker, ``(name, pid)``, when it is
        more than one (the cluster: both nodes and ``redis-server``).
    """

    name: str
    endpoint: Endpoint
    pid: int | None = None
    publish_endpoint: Endpoint | None = None
    parts: tuple[tuple[str, int], ...] = ()
