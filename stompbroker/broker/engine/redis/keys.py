"""
Every Redis key and channel the redis engine uses, named in one place
(docs/design/cluster.md, "Keys", has them as a table).

The keys of one queue, one durable subscription or one ``/stream/`` share a
hash tag (``PREFIX:{q:/queue/X}``, ``PREFIX:{d:KEY}``, ``PREFIX:{s:/stream/X}``)
so that on Redis Cluster they live in one hash slot and a script that touches
several of them stays atomic.  Keys derived from a stream (its byte counter,
a node's redelivery records of it) are the stream's name with a suffix, so they
share its slot whatever stream it is.  The cluster-wide keys that one script
uses together share a tag too (``{sched}``, ``{expiry}``).

Channels are not keys (Redis Cluster does not route ``PUBLISH`` by slot), so
they keep plain names.
"""

from __future__ import annotations

from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY, HIGHEST_PRIORITY

__all__ = [
    "Keys",
    "byte_counter",
    "registry_key",
    "destination_of",
    "durable_stream",
    "groups_key",
    "is_node_stream",
    "is_returned_stream",
    "lane_stream",
    "lane_streams",
    "lease_key",
    "mode_key",
    "node_stream",
    "node_stream_prefix",
    "queue_stream",
    "recount_mark",
    "record_key",
    "returned_stream",
    "stream_destination",
    "stream_key",
    "stream_patterns",
]

#: The lanes of a queue, highest priority first.
LANE_ORDER = tuple(range(HIGHEST_PRIORITY, -1, -1))


def queue_stream(prefix: str, destination: str) -> str:
    """:returns: the stream of a ``/queue/`` destination (its default priority's lane)."""
    return f"{prefix}:{{q:{destination}}}"


def durable_stream(prefix: str, key: str) -> str:
    """:returns: the stream of a durable subscription, by its key (``durable:[...]``)."""
    return f"{prefix}:{{d:{key}}}"


def stream_key(prefix: str, destination: str) -> str:
    """:returns: the Redis stream of a ``/stream/`` destination."""
    return f"{prefix}:{{s:{destination}}}"


def stream_destination(prefix: str, key: str) -> str | None:
    """:returns: the ``/stream/`` destination whose Redis stream ``key`` is, or ``None``."""
    head = stream_key(prefix, "")[:-1]
    if key.startswith(head) and key.endswith("}"):
        return key[len(head) : -1]
    return None


def lane_stream(prefix: str, destination: str, priority: int) -> str:
    """:returns: the stream of a queue's lane of ``priority`` (0 to 9)."""
    if priority == DEFAULT_PRIORITY:
        return queue_stream(prefix, destination)
    return f"{queue_stream(prefix, destination)}:lane:{priority}"


def lane_streams(prefix: str, destination: str) -> list[str]:
    """:returns: every lane's stream of a queue, highest priority first."""
    return [lane_stream(prefix, destination, priority) for priority in LANE_ORDER]


def mode_key(prefix: str, destination: str) -> str:
    """:returns: the hash of a queue's modes (lanes used, registry version, groups used)."""
    return queue_stream(prefix, destination) + ":mode"


def registry_key(prefix: str, destination: str) -> str:
    """:returns: the hash of a shared queue's consumers (:mod:`.consumer_registry`)."""
    return queue_stream(prefix, destination) + ":consumers"


def groups_key(prefix: str, destination: str) -> str:
    """:returns: the hash of a queue's message groups and their owners."""
    return queue_stream(prefix, destination) + ":groups"


def node_stream_prefix(prefix: str, destination: str) -> str:
    """:returns: what every node's own stream of a queue starts with (the node follows)."""
    return queue_stream(prefix, destination) + ":node:"


def node_stream(prefix: str, node: str, destination: str) -> str:
    """:returns: a node's own stream of a queue (:mod:`.dispatch`)."""
    return node_stream_prefix(prefix, destination) + node


def returned_stream(prefix: str, destination: str) -> str:
    """:returns: a grouped queue's returned stream (:mod:`.grouped_returns`)."""
    return queue_stream(prefix, destination) + ":returned"


def lease_key(prefix: str, destination: str) -> str:
    """:returns: the key the node deciding a queue holds (:mod:`.dispatch`)."""
    return queue_stream(prefix, destination) + ":lease"


def byte_counter(stream: str) -> str:
    """:returns: the key of the byte counter of a stream (any of a queue's, or a ``/stream/``)."""
    return stream + ":bytes"


def recount_mark(stream: str) -> str:
    """:returns: the key that says the stream's count was recounted within the second."""
    return byte_counter(stream) + ":recounted"


def record_key(node: str, stream: str) -> str:
    """:returns: a node's redelivery records of a stream (:mod:`.redelivery_records`)."""
    return f"{stream}:redeliveries:{node}"


def destination_of(prefix: str, key: str) -> str:
    """
    :returns: the ``/queue/`` destination of any of a queue's streams (lanes,
        nodes' own, returned), or the key (``durable:[...]``) of a durable
        subscription's stream; ``key`` itself for any other key.
    """
    for kind in ("q", "d"):
        head = f"{prefix}:{{{kind}:"
        end = key.rfind("}")
        if key.startswith(head) and end >= len(head):
            return key[len(head) : end]
    return key


def stream_patterns(prefix: str) -> tuple[str, ...]:
    """
    :returns: ``SCAN`` patterns that match every stream of every queue and
        durable subscription (and a few other keys of theirs: a caller skips
        what is no stream).
    """
    queue = queue_stream(prefix, "*")
    lanes = queue + ":lane:[0-9]"
    return (queue, durable_stream(prefix, "*"), lanes, queue + ":node:*", queue + ":returned")


def is_node_stream(prefix: str, key: str) -> bool:
    """:returns: whether ``key`` is a node's own stream of a queue."""
    return key.startswith(node_stream_prefix(prefix, destination_of(prefix, key)))


def is_returned_stream(prefix: str, key: str) -> bool:
    """:returns: whether ``key`` is a grouped queue's returned stream."""
    return key == returned_stream(prefix, destination_of(prefix, key))


class Keys:
    """
    The names of one broker (one prefix): every key and channel starts with it.

    :param prefix: the URL's ``prefix`` (``stompbroker`` by default).
    """

    __slots__ = (
        "prefix",
        "topics",
        "streams",
        "group",
        "durables",
        "control",
        "queue_names",
        "queue_names_channel",
        "policies",
        "policies_channel",
        "retained",
        "retained_channel",
        "schedule_due",
        "schedule_jobs",
        "schedule_flying",
        "schedule_channel",
        "expiry_lease",
        "expiry_used",
        "expiry_tags",
        "resume_nodes",
        "requests",
        "presence_channel",
        "users_channel",
    )

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        #: The hash of every durable subscription: its key -> its topic pattern.
        self.durables = f"{prefix}:durables"
        #: The channel on which nodes tell each other of durable subscriptions.
        self.control = f"{prefix}:c"
        #: The pattern every node subscribes to: all topics (see docs/cluster.md).
        self.topics = f"{prefix}:t:*"
        #: The pattern every node subscribes to for the streams' new entries.
        self.streams = f"{prefix}:sc:*"
        #: The one consumer group of every queue's stream: the nodes.
        self.group = "nodes"
        #: The set of every shared queue's name, and the channel of new ones.
        self.queue_names = f"{prefix}:queues"
        self.queue_names_channel = f"{prefix}:queues:new"
        #: The hash of the policies set at run time, and the channel of changes.
        self.policies = f"{prefix}:policies"
        self.policies_channel = f"{prefix}:policies:changes"
        #: The hash of retained messages, and the channel of changes.
        self.retained = f"{prefix}:retained"
        self.retained_channel = f"{prefix}:retained:changes"
        #: Scheduled messages: the sorted set by due time, the jobs, the ones
        #: being delivered (one script uses all three: one tag); the channel
        #: that says a new one is due sooner.
        self.schedule_due = f"{prefix}:{{sched}}"
        self.schedule_jobs = f"{prefix}:{{sched}}:jobs"
        self.schedule_flying = f"{prefix}:{{sched}}:flying"
        self.schedule_channel = f"{prefix}:sched:due"
        #: Queue expiry: the sweeping node's lease, each queue's last use,
        #: and the policy each was last used under.
        self.expiry_lease = f"{prefix}:{{expiry}}:lease"
        self.expiry_used = f"{prefix}:{{expiry}}:used"
        self.expiry_tags = f"{prefix}:{{expiry}}:tags"
        #: The set of nodes that hold resumable sessions.
        self.resume_nodes = f"{prefix}:resume:nodes"
        #: The channel of management requests to every node.
        self.requests = f"{prefix}:ctl"
        #: The channel of presence changes.
        self.presence_channel = f"{prefix}:presence"
        #: The channel of a backend's actions on a user's sessions (:mod:`.user_actions`).
        self.users_channel = f"{prefix}:users"

    def topic(self, destination: str) -> str:
        """:returns: the pub/sub channel of a ``/topic/`` destination."""
        return f"{self.prefix}:t:{destination}"

    def queue(self, destination: str) -> str:
        """:returns: the stream of a ``/queue/`` destination."""
        return queue_stream(self.prefix, destination)

    def durable(self, key: str) -> str:
        """:returns: the stream of a durable subscription, by its key (``durable:[...]``)."""
        return durable_stream(self.prefix, key)

    def stream(self, destination: str) -> str:
        """:returns: the Redis stream of a ``/stream/`` destination."""
        return stream_key(self.prefix, destination)

    def stream_size(self, destination: str) -> str:
        """:returns: the key that counts the bytes a ``/stream/``'s entries hold."""
        return byte_counter(stream_key(self.prefix, destination))

    def stream_channel(self, destination: str) -> str:
        """:returns: the channel on which a ``/stream/``'s new entries go to every node."""
        return f"{self.prefix}:sc:{destination}"

    def duplicates(self, destination: str) -> str:
        """
        :returns: the sorted set of a destination's recent duplicate-detection
            ids, in the slot of the destination's stream (a topic's in its own).
        """
        if destination.startswith("/queue/"):
            return queue_stream(self.prefix, destination) + ":dd"
        if destination.startswith("/stream/"):
            return stream_key(self.prefix, destination) + ":dd"
        return f"{self.prefix}:{{t:{destination}}}:dd"

    def figures(self, node: str) -> str:
        """:returns: the key of a node's figures, for cluster-wide statistics."""
        return f"{self.prefix}:figures:{node}"

    def destination_of(self, stream: str) -> str:
        """:returns: :func:`destination_of` this prefix."""
        return destination_of(self.prefix, stream)

    def inbox(self, node: str) -> str:
        """:returns: the channel on which a node takes messages for its reply queues."""
        return f"{self.prefix}:n:{node}"

    def alive(self, node: str) -> str:
        """:returns: the key that exists while a node lives (it expires with --node-timeout)."""
        return f"{self.prefix}:alive:{node}"

    def nodes(self) -> str:
        """:returns: the pattern of every live node's key."""
        return f"{self.prefix}:alive:*"

    def answers(self, node: str) -> str:
        """:returns: the channel of the answers to a node's management requests."""
        return f"{self.prefix}:ctl:{node}"

    def presence(self, destination: str) -> str:
        """:returns: the hash of who is subscribed to a destination (:mod:`.presence`)."""
        return f"{self.prefix}:presence:{destination}"

    def sessions(self, node: str) -> str:
        """:returns: the hash of a node's resumable sessions (:mod:`.resumes`)."""
        return f"{self.prefix}:resume:{node}"

    def resume_channel(self, node: str) -> str:
        """:returns: the channel on which a node takes requests for its sessions."""
        return f"{self.prefix}:resume:to:{node}"

    def handover(self, request: str) -> str:
        """:returns: the key that carries a session handed over for a request."""
        return f"{self.prefix}:resume:handover:{request}"
