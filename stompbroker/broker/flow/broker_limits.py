"""
The broker-wide limits: connections, transactions, memory, disk, and the time a stop may take.

Each is a twistd option (see :mod:`stompbroker.app.tap`); the defaults protect
a small machine.
"""

from __future__ import annotations

from attrs import field, frozen

from stompbroker.broker.flow.disk_alarm import DEFAULT_DISK_FREE_LIMIT, DiskFreeLimit
from stompbroker.broker.flow.publisher_pauses import physical_memory

#: The default high memory mark, as a share of the machine's memory.
MEMORY_HIGH_SHARE = 0.4
#: The default low memory mark, as a share of the high one.
MEMORY_LOW_SHARE = 0.8
#: The default memory budget of queued persistent messages, as a share of the high mark.
QUEUE_MEMORY_SHARE = 0.25


def _default_memory_high() -> int:
    return int(physical_memory() * MEMORY_HIGH_SHARE)


@frozen
class Limits:
    """
    Broker-wide limits, with defaults that protect a small machine; each is a twistd option.

    :ivar max_connections: most connections open at once; 0 means no limit.
    :ivar max_connections_per_address: most connections open at once from one
        client address (the host, without the port); 0 means no limit.
    :ivar max_transactions: most transactions one connection may have open; 0
        means no limit.
    :ivar max_transaction_frames: most SEND, ACK and NACK frames one transaction
        may hold; 0 means no limit.
    :ivar memory_high: bytes of memory in use (see :mod:`stompbroker.broker.flow.publisher_pauses`)
        above which the broker stops reading from connections that publish; 0
        turns the watermark off.  Defaults to 40% of the machine's memory.
    :ivar memory_low: bytes below which it reads from them again; 0 means 80% of
        ``memory_high``.
    :ivar disk_free_limit: room the message store's disk keeps free: under it,
        connections that publish persistent messages are held (see
        :mod:`stompbroker.broker.flow.disk_alarm`); 0 bytes turns the alarm off.
    :ivar shutdown_timeout: most seconds a graceful stop waits for clients to
        take their last frames before it drops them.
    :ivar queue_memory: bytes of messages the store's queues hold in memory
        together, past which a queue keeps what arrives on disk only
        (:mod:`stompbroker.broker.queueing.paging`); ``None`` means
        :data:`QUEUE_MEMORY_SHARE` of ``memory_high`` (of its default if it is off).
    :ivar read_ahead: messages a paged queue keeps in memory, and reads per page.
    """

    max_connections: int = 10000
    max_connections_per_address: int = 0
    max_transactions: int = 100
    max_transaction_frames: int = 10000
    memory_high: int = field(factory=_default_memory_high)
    memory_low: int = 0
    disk_free_limit: DiskFreeLimit = DEFAULT_DISK_FREE_LIMIT
    shutdown_timeout: float = 10.0
    queue_memory: int | None = None
    read_ahead: int = 1000

    @property
    def memory_low_mark(self) -> int:
        """:returns: the low memory mark in bytes, the default applied."""
        return self.memory_low or int(self.memory_high * MEMORY_LOW_SHARE)

    @property
    def queue_memory_budget(self) -> int:
        """:returns: the queues' memory budget in bytes, the default applied."""
        if self.queue_memory is not None:
            return self.queue_memory
        return int((self.memory_high or _default_memory_high()) * QUEUE_MEMORY_SHARE)
