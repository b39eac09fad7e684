"""
The web port's statistics pages without sockets, through ``StubTreq`` (``/stats``,
``/metrics``, ``/dashboard`` and its vendored chart library), and the stats options
through ``makeService`` on a ``MemoryReactorClock``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.python import usage
from twisted.web.resource import getChildForRequest
from twisted.web.test.requesthelper import DummyRequest

from stompbroker.app.tap import makeService
from stompbroker.broker.management.operations import Management
from stompbroker.broker.routing.virtual_hosts import VirtualHost, VirtualHosts
from stompbroker.broker.service import Broker
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import LiveStats, StatsExport
from stompbroker.web.api import ManagementApi
from stompbroker.web.api_guard import ApiGuard
from stompbroker.web.site import STATIC, MetricsPage, web_root
from tests.support.broker import FakeConnection, Inbox
from tests.support.options import parse
from tests.support.web import get, metric_samples

#: The virtual host of the tests with virtual hosts.
SHOP = VirtualHost("shop")


class Site:
    """
    A broker with traffic, its live stats sampled once over 5 s, and its web root behind StubTreq.
    """

    def __init__(self, virtual_hosts: VirtualHosts | None = None) -> None:
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.broker = Broker(self.clock, virtual_hosts=virtual_hosts)
        self.live = LiveStats(StatsModel(self.broker, rss=lambda: 1234), interval=5.0)
        self.live.startService()
        connection = FakeConnection()
        self.broker.open_connection(connection)
        inbox = Inbox("/queue/orders", "client", connection=connection)
        self.broker.subscribe(inbox)
        for body in (b"one", b"two", b"three"):
            self.broker.send("/queue/orders", (), body, connection=connection)
        self.broker.send("/topic/news", (), b"hello", connection=connection)
        if virtual_hosts is not None:
            # The same queue name in the virtual host shop: another queue.
            shop = SHOP.internal("/queue/orders")
            for body in (b"shop-1", b"shop-2"):
                self.broker.send(shop, (), body, connection=connection)
        self.clock.advance(5.0)
        self.treq = StubTreq(web_root(self.broker, stats=self.live))


def test_stats_page_is_the_stats_model_as_json() -> None:
    """
    /stats answers JSON, never cached: totals, gauges, rates over the latest interval, connections.
    """
    site = Site()
    response, body = get(site.treq, "http://localhost/stats")
    assert response.code == 200
    assert response.headers.getRawHeaders("content-type") == ["application/json"]
    assert response.headers.getRawHeaders("cache-control") == ["no-store"]
    stats = json.loads(body)
    orders = stats["destinations"]["/queue/orders"]
    assert (orders["messages_in"], orders["bytes_in"], orders["in_flight"]) == (3, 11, 3)
    assert (orders["consumers"], orders["producers"]) == (1, 1)
    assert orders["messages_in_per_second"] == pytest.approx(0.6)
    assert stats["broker"]["rss_bytes"] == 1234
    assert stats["broker"]["messages_per_second"] == pytest.approx(0.8)
    assert stats["server"].startswith("stompbroker/")
    [connection] = stats["connections"]
    assert connection["address"] == "127.0.0.1:1"


def test_metrics_page_is_prometheus_text_read_from_the_model() -> None:
    """
    /metrics is the Prometheus text format: per-destination counters and gauges, broker figures,
    process metrics.
    """
    site = Site()
    response, body = get(site.treq, "http://localhost/metrics")
    assert response.code == 200
    assert response.headers.getRawHeaders("content-type")[0].startswith("text/plain; version=0.0.4")
    samples = metric_samples(body)
    orders = (("destination", "/queue/orders"),)
    assert samples["stompbroker_destination_messages_in_total", orders] == 3
    assert samples["stompbroker_destination_bytes_out_total", orders] == 11
    assert samples["stompbroker_destination_in_flight", orders] == 3
    assert samples["stompbroker_destination_producers", orders] == 1
    news = (("destination", "/topic/news"),)
    assert samples["stompbroker_destination_messages_in_total", news] == 1
    assert samples["stompbroker_connections", (("transport", "tcp"),)] == 1
    assert samples["stompbroker_connections_opened_total", ()] == 1
    assert samples["stompbroker_resident_memory_bytes", ()] == 1234
    assert samples["stompbroker_messages_per_second", ()] == pytest.approx(0.8)
    assert any(name == "python_info" for name, _ in samples)


class StreamSite:
    """
    A broker whose stream had four appends and a reader that was handed them, its live stats
    sampled over 5 s, and its web root (stats, metrics and the management API) behind StubTreq.
    """

    def __init__(self) -> None:
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.broker = Broker(self.clock)
        self.live = LiveStats(StatsModel(self.broker, rss=lambda: 1234), interval=5.0)
        self.live.startService()
        connection = FakeConnection()
        self.broker.open_connection(connection)
        for body in (b"one", b"two", b"three"):
            self.broker.send("/stream/audit", (), body, connection=connection)
        reader = Inbox("/stream/audit", "auto", headers={"x-stream-offset": "first"})
        self.broker.subscribe(reader)
        self.broker.send("/stream/audit", (), b"four", connection=connection)
        assert reader.bodies() == [b"one", b"two", b"three", b"four"]
        self.kept = self.broker.engine.stream_logs()["/stream/audit"].size
        self.clock.advance(5.0)
        api = ManagementApi(Management(self.broker), ApiGuard(None, None, self.clock), self.live)
        self.treq = StubTreq(web_root(self.broker, stats=self.live, api=api))


def test_stats_page_counts_a_streams_appends_reads_and_retained_range() -> None:
    """/stats counts a stream's appends and reads, their rates, and the range it keeps."""
    site = StreamSite()
    _, body = get(site.treq, "http://localhost/stats")
    audit = json.loads(body)["destinations"]["/stream/audit"]
    assert (audit["messages_in"], audit["bytes_in"]) == (4, 15)
    assert (audit["messages_delivered"], audit["bytes_out"], audit["consumers"]) == (4, 15, 1)
    assert audit["messages_in_per_second"] == pytest.approx(0.8)
    assert audit["messages_delivered_per_second"] == pytest.approx(0.8)
    assert audit["stream"] == {
        "first_offset": 0,
        "last_offset": 3,
        "messages": 4,
        "bytes": site.kept,
    }


def test_metrics_page_has_a_streams_counters_and_retained_range() -> None:
    """/metrics has a stream's appends and reads as destination counters, its range as gauges."""
    site = StreamSite()
    _, body = get(site.treq, "http://localhost/metrics")
    samples = metric_samples(body)
    audit = (("destination", "/stream/audit"),)
    assert samples["stompbroker_destination_messages_in_total", audit] == 4
    assert samples["stompbroker_destination_messages_delivered_total", audit] == 4
    assert samples["stompbroker_destination_bytes_out_total", audit] == 15
    assert samples["stompbroker_stream_retained_messages", audit] == 4
    assert samples["stompbroker_stream_retained_bytes", audit] == site.kept
    assert samples["stompbroker_stream_first_offset", audit] == 0
    assert samples["stompbroker_stream_last_offset", audit] == 3


def test_api_destinations_show_a_streams_rates_and_retained_range() -> None:
    """/api/destinations and a stream's detail carry its rates and the range it keeps."""
    site = StreamSite()
    _, body = get(site.treq, "http://localhost/api/destinations")
    [audit] = json.loads(body)
    assert (audit["kind"], audit["depth"], audit["consumers"]) == ("stream", 4, 1)
    assert audit["messages_in_per_second"] == pytest.approx(0.8)
    assert audit["messages_delivered_per_second"] == pytest.approx(0.8)
    kept = {"first_offset": 0, "last_offset": 3, "messages": 4, "bytes": site.kept}
    assert audit["stream"] == kept
    _, body = get(site.treq, "http://localhost/api/destinations/%2Fstream%2Faudit")
    assert json.loads(body)["stream"] == kept


def test_with_vhosts_stats_name_destinations_as_clients_do() -> None:
    """
    /stats keys a virtual host's destination HOST:NAME and gives each its vhost and
    client name; no internal name shows.
    """
    site = Site(VirtualHosts([SHOP]))
    _, body = get(site.treq, "http://localhost/stats")
    assert b"\\u001d" not in body.lower()
    destinations = json.loads(body)["destinations"]
    assert sorted(destinations) == ["/queue/orders", "/topic/news", "shop:/queue/orders"]
    shop, orders = destinations["shop:/queue/orders"], destinations["/queue/orders"]
    assert (shop["vhost"], shop["name"], shop["messages_in"], shop["depth"]) == (
        "shop",
        "/queue/orders",
        2,
        2,
    )
    assert (orders["vhost"], orders["name"], orders["messages_in"]) == ("/", "/queue/orders", 3)


def test_with_vhosts_metrics_carry_a_vhost_label() -> None:
    """Per-destination series get vhost beside the client's name; without vhosts, no label."""
    site = Site(VirtualHosts([SHOP]))
    _, body = get(site.treq, "http://localhost/metrics")
    assert b"\x1d" not in body
    samples = metric_samples(body)
    shop = (("destination", "/queue/orders"), ("vhost", "shop"))
    default = (("destination", "/queue/orders"), ("vhost", "/"))
    assert samples["stompbroker_destination_messages_in_total", shop] == 2
    assert samples["stompbroker_destination_depth", shop] == 2
    assert samples["stompbroker_destination_producers", shop] == 1
    assert samples["stompbroker_destination_messages_in_total", default] == 3
    _, plain = get(Site().treq, "http://localhost/metrics")
    assert not any("vhost" in dict(labels) for _, labels in metric_samples(plain))


def test_metrics_follow_the_model_at_each_scrape() -> None:
    """A scrape reads the model then: a SEND since the last one shows at once."""
    site = Site()
    site.broker.send("/topic/news", (), b"again")
    _, body = get(site.treq, "http://localhost/metrics")
    news = (("destination", "/topic/news"),)
    assert metric_samples(body)["stompbroker_destination_messages_in_total", news] == 2


def test_metrics_page_speaks_openmetrics_when_asked() -> None:
    """A scraper that accepts OpenMetrics gets it, as Prometheus negotiates."""
    request = DummyRequest([b"metrics"])
    request.requestHeaders.setRawHeaders(
        b"accept", [b"application/openmetrics-text; version=1.0.0"]
    )
    body = MetricsPage(Site().live).render_GET(request)
    [content_type] = request.responseHeaders.getRawHeaders(b"content-type")
    assert content_type.startswith(b"application/openmetrics-text")
    assert body.endswith(b"# EOF\n")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (b"/dashboard", "dashboard.html"),
        (b"/static/dashboard.js", "dashboard.js"),
        (b"/static/vendor/uplot/uPlot.iife.min.js", "vendor/uplot/uPlot.iife.min.js"),
        (b"/static/vendor/uplot/uPlot.min.css", "vendor/uplot/uPlot.min.css"),
        (b"/static/vendor/uplot/LICENSE", "vendor/uplot/LICENSE"),
    ],
)
def test_dashboard_and_its_vendored_charts_are_files_of_the_package(
    path: bytes, expected: str
) -> None:
    """
    /dashboard, its script and the vendored uPlot with its licence are served from the package.
    """
    root = web_root(Broker(Clock()), stats=Site().live)
    resource = getChildForRequest(root, DummyRequest(path.split(b"/")[1:]))
    assert resource.path == str(STATIC / expected)
    assert (STATIC / expected).is_file()


def test_dashboard_uses_the_vendored_libraries_and_the_stats_topic() -> None:
    """
    The dashboard loads stompjs and uPlot from the package (no CDN) and follows the stats topic.
    """
    page = (STATIC / "dashboard.html").read_text()
    assert '<script src="static/vendor/uplot/uPlot.iife.min.js"></script>' in page
    assert '<script src="static/vendor/stompjs/stomp.umd.min.js"></script>' in page
    assert "https://cdn" not in page
    script = (STATIC / "dashboard.js").read_text()
    assert '"/topic/stompbroker.stats"' in script and "new uPlot(" in script
    assert "MIT License" in (STATIC / "vendor/uplot/LICENSE").read_text()


@pytest.mark.parametrize("path", ["stats", "metrics", "dashboard"])
def test_a_root_without_live_stats_has_no_stats_pages(path: str) -> None:
    """web_root without a LiveStats (an embedding's choice) serves no statistics pages."""
    response, _ = get(StubTreq(web_root(Broker(Clock()))), f"http://localhost/{path}")
    assert response.code == 404


def services(top: Any) -> dict[str, Any]:
    return {service.name: service for service in top if service.name}


def test_live_stats_always_run_and_export_needs_stats_dir(tmp_path: Any) -> None:
    """
    makeService always adds the live stats service; --stats-dir adds the export, at --stats-
    interval.
    """
    plain = services(makeService(parse(), reactor=MemoryReactorClock()))
    assert isinstance(plain["live stats"], LiveStats)
    assert plain["live stats"].step == 5.0
    assert "stats export" not in plain
    argv = [
        "--stats-dir",
        str(tmp_path / "s"),
        "--stats-interval",
        "2.5",
        "--monitor-interval",
        "1",
    ]
    exporting = services(makeService(parse(*argv), reactor=MemoryReactorClock()))
    export = exporting["stats export"]
    assert isinstance(export, StatsExport)
    assert (export.step, export.exporter.directory) == (2.5, tmp_path / "s")
    assert exporting["live stats"].step == 1.0


@pytest.mark.parametrize(
    "argv",
    [["--stats-interval", "0"], ["--monitor-interval", "-1"], ["--stats-interval", "inf"]],
)
def test_stats_intervals_must_be_positive(argv: list[str]) -> None:
    """A stats interval of 0, below 0 or infinite is a usage error."""
    with pytest.raises(usage.UsageError):
        parse(*argv)
