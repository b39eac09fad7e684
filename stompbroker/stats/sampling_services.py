"""
The services that sample the stats model on a timer: live publishing, and the export.

:class:`LiveStats` samples every few seconds (``--monitor-interval``): it keeps
the latest interval for the rates of ``/stats`` and ``/metrics``, publishes it
as JSON on ``/topic/stompbroker.stats`` while anyone subscribes there, and
answers subscriptions to ``/queue/monitor`` as stompserver did: each consumer of
that queue gets every status message, in stompserver's text format.

:class:`StatsExport` samples every ``--stats-interval`` and appends the records
to the hourly JSON Lines files of :class:`~stompbroker.stats.export.StatsExporter`;
when it stops (SIGTERM, say), it writes the last, shorter interval and publishes
the open file, so a stopped broker leaves nothing half-written.  A failing disk
is logged, not raised: a raise would end the timer's loop for good.

Both are ``TimerService`` objects on the broker's clock, children of the
service that starts them once the broker is ready.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Callable
from typing import Any

from twisted.application.internet import TimerService

from stompbroker.logs import logger
from stompbroker.stats.documents import exported_records, live_document, monitor_text
from stompbroker.stats.export import StatsExporter
from stompbroker.stats.history import History
from stompbroker.stats.model import STATS_TOPIC, Interval, Sampler, StatsModel

log = logger("stompbroker.stats")

#: The queue whose subscribers get stompserver's status messages.
MONITOR_QUEUE = "/queue/monitor"
#: Seconds between live samples: stompserver's monitor period.
DEFAULT_MONITOR_INTERVAL = 5.0
#: Seconds between exported samples.
DEFAULT_STATS_INTERVAL = 10.0
JSON_HEADERS = (("content-type", "application/json"),)


class LiveStats(TimerService):
    """
    Samples the model every ``interval`` seconds, for the live surfaces.

    :param model: the :class:`~stompbroker.stats.model.StatsModel`.
    :param interval: seconds between samples.
    :ivar latest: the latest :class:`~stompbroker.stats.model.Interval`, or ``None``
        before the second sample.
    :ivar history: the last hour of intervals, for the console's charts.
    """

    name = "live stats"

    def __init__(self, model: StatsModel, interval: float = DEFAULT_MONITOR_INTERVAL) -> None:
        super().__init__(interval, self.tick)
        self.clock = model.clock
        self.model = model
        self.latest: Interval | None = None
        self.history = History(interval)
        self._sampler: Sampler = model.sampler()
        node = secrets.token_hex(4)
        self._monitor_ids = (f"monitor-{node}-{number}" for number in itertools.count(1))

    def tick(self) -> None:
        """Sample; publish the interval to whoever listens."""
        interval = self._sampler.sample()
        if interval is None:
            return
        self.latest = interval
        self.history.record(interval)
        broker = self.model.broker
        engine = broker.engine
        if engine.topic_subscriptions(STATS_TOPIC):
            broker.publish(STATS_TOPIC, json.dumps(live_document(interval)), JSON_HEADERS)
        monitor = engine.find_queue(MONITOR_QUEUE)
        if monitor is not None and monitor.consumers:
            text = monitor_text(interval.end)
            if text:
                # stompserver sent its status to every subscriber of the queue, not
                # to one in turn: each consumer with room gets a copy.
                monitor.deliver_copies(text.encode("utf-8"), (), self._monitor_ids)


class StatsExport(TimerService):
    """
    Samples the model every ``interval`` seconds and appends the records to the export.

    :param model: the :class:`~stompbroker.stats.model.StatsModel`.
    :param exporter: the :class:`~stompbroker.stats.export.StatsExporter` of
        the stats directory.
    :param interval: seconds between samples (``--stats-interval``).
    """

    name = "stats export"

    def __init__(
        self,
        model: StatsModel,
        exporter: StatsExporter,
        interval: float = DEFAULT_STATS_INTERVAL,
    ) -> None:
        super().__init__(interval, self.tick)
        self.clock = model.clock
        self.exporter = exporter
        self._sampler = model.sampler()
        self._failing = False

    def tick(self) -> None:
        """Append the interval's records, and publish the hour's file once the hour is over."""
        self._export(self.exporter.roll)

    def stopService(self) -> Any:
        """Write the interval since the last tick, publish the open file, then stop."""
        if self.running:
            self._export(self.exporter.close)
        return super().stopService()

    def _export(self, finish: Callable[[], Any]) -> None:
        """
        Sample, write the records, then ``finish`` (roll or close the file).

        A failure is logged once per run of failures, and not raised; the records
        of a failed interval are lost, and the next interval tries again.
        """
        interval = self._sampler.sample()
        try:
            if interval is not None:
                self.exporter.write(exported_records(interval))
            finish()
        except OSError as error:
            if not self._failing:
                log.error(
                    "cannot write statistics to {directory}: {error}",
                    directory=str(self.exporter.directory),
                    error=str(error),
                )
            self._failing = True
            return
        if self._failing:
            log.info(
                "writing statistics to {directory} again", directory=str(self.exporter.directory)
            )
            self._failing = False
