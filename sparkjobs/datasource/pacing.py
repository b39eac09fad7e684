"""
When a micro-batch may run: ``minMessagesPerTrigger`` with ``maxTriggerDelay``.

The rule is the Kafka source's (``minOffsetsPerTrigger``, ``maxTriggerDelay``),
so that a query moved from Kafka to the broker keeps its batch sizes: a trigger
that finds fewer new messages than the minimum is skipped (Spark runs no batch),
unless the delay has passed since the last batch ran.  The first trigger of a
query always runs, as Kafka's does (its last trigger starts at time zero).

Pure logic: the clock and the count are given, so the rule is tested without
Spark, a broker or real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from attrs import define, field


@define
class TriggerPacing:
    """
    :ivar minimum: the fewest new messages a batch waits for.
    :ivar max_delay: seconds after the last batch when one runs however few there are.
    :ivar clock: seconds, only compared with itself.
    """

    minimum: int
    max_delay: float
    clock: Callable[[], float] = time.monotonic
    _last_batch: float | None = field(default=None, init=False)

    def admit(self, available: Callable[[], int]) -> bool:
        """
        :param available: counts the new messages, up to :attr:`minimum`; called
            only when the delay has not passed, since counting may read from the broker.
        :returns: whether a batch runs now; if so, the delay counts from now.
        """
        now = self.clock()
        due = self._last_batch is None or now - self._last_batch >= self.max_delay
        if due or available() >= self.minimum:
            self._last_batch = now
            return True
        return False
