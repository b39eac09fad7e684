"""
The hour of history the broker keeps (:mod:`stompbroker.stats.history`): one point
per live interval, the oldest forgotten past the hour, served by ``/api/history``
with ``?since=`` for the points a page has not seen yet.
"""

from __future__ import annotations

from twisted.internet.task import Clock

from stompbroker.broker.service import Broker
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import LiveStats
from tests.support.api import Api
from tests.support.broker import FakeConnection


def test_each_live_interval_leaves_a_point_of_rates_connections_and_memory(
    clock: Clock, broker: Broker
) -> None:
    """Ten messages in a 5 s interval are 2 per second; the connection and the memory count."""
    broker.open_connection(FakeConnection())
    live = LiveStats(StatsModel(broker), interval=5.0)
    live.startService()
    for _ in range(10):
        broker.send("/queue/q", (), b"hello")
    clock.advance(5.0)
    [point] = live.history.points()
    assert point.messages_in_per_second == 2.0
    assert point.messages_delivered_per_second == 0.0
    assert point.connections == 1
    assert point.rss_bytes > 0
    assert point.ts == clock.seconds()
    live.stopService()


def test_the_history_keeps_one_hour_and_forgets_the_oldest(clock: Clock, broker: Broker) -> None:
    """At one point per 10 minutes, six points make the hour; a seventh pushes out the first."""
    live = LiveStats(StatsModel(broker), interval=600.0)
    live.startService()
    clock.advance(600.0)
    first = live.history.points()[0].ts
    for _ in range(6):
        clock.advance(600.0)
    points = live.history.points()
    assert len(points) == 6
    assert points[0].ts == first + 600.0
    assert [point.ts for point in live.history.points(since=points[-2].ts)] == [points[-1].ts]
    live.stopService()


def test_the_api_serves_the_history_and_the_points_since_a_time() -> None:
    """GET /api/history has interval, span and points; ?since= only the newer ones."""
    api = Api(live_interval=5.0)
    assert api.live is not None
    api.live.tick()
    api.broker.publish("/queue/orders", "four")
    api.clock.advance(5.0)
    api.live.tick()
    code, history, _ = api.call("GET", "history")
    assert code == 200
    assert (history["interval_s"], history["span_s"]) == (5.0, 3600.0)
    [point] = history["points"]
    assert set(point) == {
        "ts",
        "messages_in_per_second",
        "messages_delivered_per_second",
        "connections",
        "rss_bytes",
    }
    assert api.call("GET", f"history?since={point['ts']}")[1]["points"] == []
    code, error, _ = api.call("GET", "history?since=yesterday")
    assert (code, error["error"]) == (400, "bad request")
    assert "epoch seconds" in error["detail"]
