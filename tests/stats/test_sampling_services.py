"""
The timed stats services on a ``task.Clock``: the live topic, stompserver's
``/queue/monitor``, and the JSON Lines export (its last file on stop, and a
failing disk that must not stop the timer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twisted.internet.task import Clock
from twisted.logger import formatEvent

from stompbroker.broker.routing.virtual_hosts import VirtualHost
from stompbroker.broker.service import Broker
from stompbroker.stats.export import StatsExporter
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import MONITOR_QUEUE, STATS_TOPIC, LiveStats, StatsExport
from stompbroker.stats.schema import FILE_GLOB, DestinationRecord, record_from_json_line
from stompbroker.stats.stream import NODE_HEADER, StatsStream
from tests.support.broker import FakeConnection, Inbox


def subscriber(broker: Broker, destination: str, ack_mode: str = "auto", name: str = "s") -> Inbox:
    inbox = Inbox(destination, ack_mode, subscription_id=name)
    broker.open_connection(inbox.connection)
    broker.subscribe(inbox)
    return inbox


def test_live_stats_publish_on_the_topic_only_while_someone_listens(
    clock: Clock, broker: Broker
) -> None:
    """
    Each interval goes to /topic/stompbroker.stats as JSON, and nothing is published while nobody
    subscribes.
    """
    broker.open_connection(FakeConnection())
    live = LiveStats(StatsModel(broker), interval=2.0)
    live.startService()
    broker.send("/queue/q", (), b"hello")
    clock.advance(2.0)
    assert live.latest is not None
    assert STATS_TOPIC not in broker.traffic.destinations
    inbox = subscriber(broker, STATS_TOPIC)
    clock.advance(2.0)
    [message] = inbox.received
    assert ("content-type", "application/json") in message.headers
    document = json.loads(message.body)
    assert document["interval_s"] == 2.0
    assert document["broker"]["connections"] == 2
    live.stopService()
    clock.advance(10.0)
    assert len(inbox.received) == 1


def test_the_live_feed_is_not_counted_as_the_traffic_it_shows(clock: Clock, broker: Broker) -> None:
    """The dashboard's own subscription to /topic/stompbroker.stats is in no statistic."""
    live = LiveStats(StatsModel(broker), interval=2.0)
    live.startService()
    inbox = subscriber(broker, STATS_TOPIC)
    for _ in range(3):
        clock.advance(2.0)
    assert len(inbox.received) >= 2
    assert live.latest is not None
    assert list(live.latest.by_destination()) == []
    assert live.latest.broker.messages_per_second == 0.0
    assert STATS_TOPIC not in live.latest.end.destinations
    assert live.latest.end.total("messages_delivered") == 0
    live.stopService()


def test_every_monitor_queue_subscriber_gets_the_status(clock: Clock, broker: Broker) -> None:
    """
    Each subscriber of /queue/monitor gets every status message in stompserver's format, as
    stompserver sent them.
    """
    live = LiveStats(StatsModel(broker), interval=5.0)
    live.startService()
    watcher = subscriber(broker, MONITOR_QUEUE, name="w")
    careful = subscriber(broker, MONITOR_QUEUE, "client", name="c")
    broker.send("/queue/jobs", (), b"x")
    clock.advance(5.0)
    assert watcher.bodies() == careful.bodies()
    assert b"Queue: /queue/jobs\nsize: 1\ndequeued: 0\nenqueued: 1\n\n" in watcher.bodies()[0]
    [status] = careful.received
    assert status.destination == MONITOR_QUEUE
    broker.ack(careful.connection, status.message_id, subscriber=careful)
    clock.advance(5.0)
    assert (len(watcher.received), len(careful.received)) == (2, 2)
    live.stopService()
    counted = broker.traffic.destinations[MONITOR_QUEUE]
    assert (counted.messages_in, counted.messages_delivered, counted.messages_acked) == (4, 4, 3)


def exported(directory: Path) -> list[Any]:
    return [
        record_from_json_line(line)
        for path in sorted(directory.glob(FILE_GLOB))
        for line in path.read_text().splitlines()
    ]


def test_export_writes_each_interval_and_the_last_one_on_stop(
    clock: Clock, broker: Broker, tmp_path: Path
) -> None:
    """
    Every interval is appended, and stopping writes the shorter last one and publishes the file.
    """
    export = StatsExport(StatsModel(broker), StatsExporter(tmp_path, clock.seconds), interval=10.0)
    export.startService()
    broker.send("/topic/a", (), b"12")
    clock.advance(10.0)
    broker.send("/topic/a", (), b"345")
    clock.advance(4.0)
    assert list(tmp_path.glob(FILE_GLOB)) == []
    export.stopService()
    records = [r for r in exported(tmp_path) if isinstance(r, DestinationRecord)]
    assert [(r.interval_s, r.messages_in, r.bytes_in) for r in records] == [
        (10.0, 1, 2),
        (4.0, 1, 3),
    ]
    assert not any(path.name.startswith(".") for path in tmp_path.iterdir())


def test_export_names_a_vhosts_destinations_host_colon_name(
    clock: Clock, broker: Broker, tmp_path: Path
) -> None:
    """The export files never hold the broker's internal names of a virtual host's destinations."""
    export = StatsExport(StatsModel(broker), StatsExporter(tmp_path, clock.seconds), interval=10.0)
    export.startService()
    broker.send(VirtualHost("shop").internal("/topic/a"), (), b"12")
    broker.send("/topic/a", (), b"345")
    export.stopService()
    records = [r for r in exported(tmp_path) if isinstance(r, DestinationRecord)]
    assert sorted((r.destination, r.bytes_in) for r in records) == [
        ("/topic/a", 3),
        ("shop:/topic/a", 2),
    ]


def test_a_failing_disk_is_logged_once_and_the_timer_goes_on(
    clock: Clock, broker: Broker, tmp_path: Path, log_events: list[Any]
) -> None:
    """
    An OSError from the exporter is logged, not raised, so the TimerService keeps looping and
    recovers.
    """
    blocked = tmp_path / "stats"
    blocked.write_text("a file where the directory should be")
    export = StatsExport(StatsModel(broker), StatsExporter(blocked, clock.seconds), interval=1.0)
    export.startService()
    clock.advance(1.0)
    clock.advance(1.0)
    assert export._loop.running
    blocked.unlink()
    broker.send("/queue/q", (), b"x")
    clock.advance(1.0)
    export.stopService()
    texts = [formatEvent(event) for event in log_events]
    assert sum("cannot write statistics" in text for text in texts) == 1
    assert any("writing statistics to" in text and "again" in text for text in texts)
    assert any(isinstance(r, DestinationRecord) for r in exported(blocked))


def test_the_stats_stream_appends_each_interval_s_records_tagged_with_the_node(
    clock: Clock, broker: Broker
) -> None:
    """Each record of an interval is one message on the stream, its body the export's line."""
    model = StatsModel(broker)
    stream = StatsStream(model, "/stream/stats", interval=5.0)
    stream.startService()
    broker.send("/queue/jobs", (), b"abc")
    clock.advance(5.0)
    reader = Inbox("/stream/stats", "auto", headers={"x-stream-offset": "first"})
    broker.open_connection(reader.connection)
    broker.subscribe(reader)
    stream.stopService()
    records = [record_from_json_line(message.body.decode()) for message in reader.received]
    [jobs] = [
        r for r in records if isinstance(r, DestinationRecord) and r.destination == "/queue/jobs"
    ]
    assert (jobs.interval_s, jobs.messages_in, jobs.bytes_in) == (5.0, 1, 3)
    for message in reader.received:
        headers = dict(message.headers)
        assert headers[NODE_HEADER] == model.node
        assert headers["content-type"] == "application/json"
