"""
The statistics as a stream: :class:`StatsStream` appends each interval's
records to a ``/stream/`` destination of the broker (``--stats-stream``).

The records are the export's (:mod:`stompbroker.stats.schema`), one message
per record, its body the record's JSON line, so the Spark jobs read them with
the same schema whether from the files or, through the ``stompbroker`` data
source, from the stream (``python -m sparkjobs.live --broker URL``).  The
stream is a stream like any other: retention by ``--stream-max-bytes`` and
``--stream-max-age``, read with the ``read`` right on its name.

Each node appends its *own* figures (not the cluster's sums that ``/stats``
and the file export show), with the header :data:`NODE_HEADER` naming the
node: with the redis engine every node appends to the one shared stream, so
the stream holds each node's records once and a reader adds them up.
"""

from __future__ import annotations

from twisted.application.internet import TimerService

from stompbroker.stats.model import Sampler, StatsModel
from stompbroker.stats.schema import record_to_json_line

#: A sensible name for the stream; the option has no default (off).
DEFAULT_STATS_STREAM = "/stream/stompbroker.stats"
#: The header naming the node whose figures a record holds.
NODE_HEADER = "x-stats-node"
JSON_CONTENT_TYPE = "application/json"


class StatsStream(TimerService):
    """
    Samples this node every ``interval`` seconds and appends its records to ``destination``.

    :param model: the :class:`~stompbroker.stats.model.StatsModel`.
    :param destination: a ``/stream/`` destination.
    :param interval: seconds between samples (``--stats-interval``).
    """

    name = "stats stream"

    def __init__(self, model: StatsModel, destination: str, interval: float) -> None:
        super().__init__(interval, self.tick)
        self.clock = model.clock
        self.destination = destination
        self._model = model
        self._sampler: Sampler = model.sampler(own=True)

    def tick(self) -> None:
        """Append the interval's records, one message each."""
        interval = self._sampler.sample()
        if interval is None:
            return
        headers = (
            ("content-type", JSON_CONTENT_TYPE),
            (NODE_HEADER, self._model.node),
        )
        for record in interval.records():
            self._model.broker.publish(
                self.destination, record_to_json_line(record).encode("utf-8"), headers
            )
