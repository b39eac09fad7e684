"""
The disk alarm on the web port, without sockets: ``/api/overview`` and ``/stats``
carry it as ``disk``, and ``/metrics`` gauges it while it runs.
"""

from __future__ import annotations

import json
from typing import Any

from treq.testing import StubTreq
from twisted.internet.task import Clock

from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.flow.disk_alarm import DISK_SAMPLE_INTERVAL, DiskFreeLimit
from stompbroker.broker.management.operations import Management
from stompbroker.broker.service import Broker
from stompbroker.broker.store.disk_space import DiskSpace
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import LiveStats
from stompbroker.web.api import ManagementApi
from stompbroker.web.api_guard import ApiGuard
from stompbroker.web.site import web_root
from tests.support.broker import FakeConnection
from tests.support.web import metric_samples

MIB = 1 << 20
LIMIT = DiskFreeLimit(size=50 * MIB)


class Publisher(FakeConnection):
    """A connection the broker may stop reading from."""

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


class Site:
    """A broker whose store's disk the test fills, and its web port without --auth."""

    def __init__(self, limit: DiskFreeLimit = LIMIT) -> None:
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.free = 500 * MIB
        self.broker = Broker(
            self.clock, limits=Limits(memory_high=0, disk_free_limit=limit), store=MemoryStore()
        )
        self.broker.backpressure.disk_space = lambda: DiskSpace(self.free, 1000 * MIB)
        self.live = LiveStats(StatsModel(self.broker, rss=lambda: 1234), interval=5.0)
        self.broker.startService()
        self.live.startService()
        api = ManagementApi(Management(self.broker), ApiGuard(None, None, self.clock), self.live)
        self.treq = StubTreq(web_root(self.broker, stats=self.live, api=api))

    def fill(self, free: int) -> None:
        self.free = free
        self.clock.advance(DISK_SAMPLE_INTERVAL)

    def get(self, path: str) -> bytes:
        responses: list[Any] = []
        self.treq.get(f"http://localhost/{path}").addCallback(responses.append)
        self.treq.flush()
        [response] = responses
        bodies: list[bytes] = []
        self.treq.content(response).addCallback(bodies.append)
        self.treq.flush()
        return bodies[0]


def test_the_overview_and_stats_show_the_disk_alarm() -> None:
    """/api/overview and /stats say the room left, the limit, and the alarm with its time."""
    site = Site()
    overview = json.loads(site.get("api/overview"))
    assert overview["disk"] == {
        "enabled": True,
        "alarm": False,
        "free_bytes": 500 * MIB,
        "total_bytes": 1000 * MIB,
        "limit_bytes": 50 * MIB,
        "since": None,
        "held_publishers": 0,
    }
    site.fill(10 * MIB)
    publisher = Publisher("p")
    site.broker.open_connection(publisher)
    site.broker.send("/queue/q", (("persistent", "true"),), b"x", connection=publisher)
    for document in (json.loads(site.get("api/overview")), json.loads(site.get("stats"))):
        disk = document["disk"]
        assert (disk["alarm"], disk["free_bytes"], disk["held_publishers"]) == (True, 10 * MIB, 1)
        assert disk["since"].endswith("Z")


def test_metrics_gauge_the_disk_alarm_while_it_runs() -> None:
    """/metrics has stompbroker_disk_alarm 0, then 1; nothing of it with the alarm off."""
    site = Site()
    before = metric_samples(site.get("metrics"))
    assert before["stompbroker_disk_alarm", ()] == 0
    assert before["stompbroker_disk_free_bytes", ()] == 500 * MIB
    assert before["stompbroker_disk_free_limit_bytes", ()] == 50 * MIB
    site.fill(10 * MIB)
    after = metric_samples(site.get("metrics"))
    assert after["stompbroker_disk_alarm", ()] == 1
    assert after["stompbroker_disk_held_publishers", ()] == 0
    off = metric_samples(Site(DiskFreeLimit()).get("metrics"))
    assert ("stompbroker_disk_alarm", ()) not in off
