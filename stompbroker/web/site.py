"""
The broker's web site: one HTTP port for browsers, health checks and statistics.

==============  =================================================================
path            what it serves
==============  =================================================================
``/``           a demo page: connect, subscribe, send, watch messages arrive
``/static/``    the pages' scripts, ``resumable.js`` (resumable sessions over
                stompjs, docs/resume.md), the vendored ``@stomp/stompjs`` and uPlot
``/ws``         STOMP over WebSocket (:mod:`stompbroker.transport.websocket`)
``/stomp``      the same endpoint, under the name some clients expect
``/healthz``    ``200 {"status": "ok"}`` while the broker runs, ``503`` otherwise
``/stats``      the stats model as JSON (:func:`stompbroker.stats.model.stats_document`);
                with ``--auth``, its connections only for the ``read`` right
``/metrics``    the same in the Prometheus exposition format
``/dashboard``  live charts, fed by ``/topic/stompbroker.stats`` over ``/ws``
``/api/``       the management API (:mod:`stompbroker.web.api`), JSON
``/console``    the management console, a page over ``/api/``
==============  =================================================================

:func:`web_root` builds a plain ``twisted.web`` resource tree, so that an
application embedding the broker can hang its own resources on it with
``putChild``; :class:`WebSite` serves any such tree.  The statistics pages are
there when :func:`web_root` is given the broker's
:class:`~stompbroker.stats.sampling_services.LiveStats`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prometheus_client.exposition import choose_encoder
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure
from twisted.web import server
from twisted.web.http import Request
from twisted.web.pages import notFound
from twisted.web.resource import IResource, Resource
from twisted.web.server import NOT_DONE_YET, Site
from twisted.web.static import File

from stompbroker import __version__
from stompbroker.logs import logger
from stompbroker.protocol.session import SessionConfig
from stompbroker.security.identity import Identity
from stompbroker.stats.documents import stats_document
from stompbroker.stats.metrics import metrics_registry
from stompbroker.stats.sampling_services import LiveStats
from stompbroker.stats.setup import RunningSetup
from stompbroker.transport.forwarded import TrustedProxies, client_address
from stompbroker.transport.websocket import WebSocketConfig, stomp_websocket_resource
from stompbroker.web.api import ManagementApi
from stompbroker.web.api_guard import EVERYTHING, READ, ApiError, ApiGuard

log = logger("stompbroker.web.site")

#: The package's static files: the demo page and the vendored stompjs.
STATIC = Path(__file__).parent / "static"

#: The paths the WebSocket endpoint answers on.
WEBSOCKET_PATHS = (b"ws", b"stomp")


#: Static files that pages of other origins load (an ES module needs CORS to be
#: imported across origins): the resumable-session module for apps' own pages.
SHARED_FILES = frozenset({"resumable.js"})


class StaticFiles(File):
    """
    Files under a folder of the package, with neither index pages nor directory
    listings; those of :data:`SHARED_FILES` may be loaded by any origin's pages.
    """

    indexNames: list[str] = []

    def directoryListing(self) -> IResource:
        return notFound()

    def render_GET(self, request: Request) -> Any:
        if self.basename() in SHARED_FILES:
            request.setHeader(b"access-control-allow-origin", b"*")
        return super().render_GET(request)


#: The pages' Content-Security-Policy: their scripts and styles come from this
#: origin only, so that an injected script cannot run and read the credentials
#: the pages keep in sessionStorage; WebSockets may go anywhere (the demo page
#: takes any URL).  The pages' own inline ``<style>`` elements need
#: ``'unsafe-inline'`` for styles, never for scripts.
PAGE_POLICY = (
    b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
    b" img-src 'self' data:; connect-src 'self' ws: wss:; frame-ancestors 'none';"
    b" base-uri 'none'; form-action 'self'"
)


class Page(StaticFiles):
    """An HTML page of the package, served with :data:`PAGE_POLICY` and never framed."""

    def render_GET(self, request: Request) -> Any:
        request.setHeader(b"content-security-policy", PAGE_POLICY)
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.setHeader(b"referrer-policy", b"same-origin")
        return super().render_GET(request)


class HealthCheck(Resource):
    """
    ``/healthz``: whether the broker service is running, for load balancers and orchestrators.

    :param broker: the :class:`~stompbroker.broker.service.Broker`.
    """

    isLeaf = True

    def __init__(self, broker: Any) -> None:
        super().__init__()
        self._broker = broker

    def render_GET(self, request: Request) -> bytes:
        running = bool(self._broker.running)
        request.setResponseCode(200 if running else 503)
        request.setHeader(b"content-type", b"application/json")
        request.setHeader(b"cache-control", b"no-store")
        return json.dumps({"status": "ok" if running else "stopped"}).encode("ascii")


#: What ``/stats`` says instead of its connections to a caller without the right to see them.
WITHHELD = (
    "per-connection details need the read right on every destination, as"
    " /api/connections does: send HTTP Basic credentials or a bearer token"
)


class StatsPage(Resource):
    """
    ``/stats``: the stats model as JSON, read at each request.

    With ``--auth`` (a guard with a portal), the list of connections (each
    client's login and address) is for callers whose credentials carry the
    ``read`` right on every destination, as ``/api/connections`` is; anyone
    else gets the document with ``connections`` null and
    ``connections_withheld`` saying why.  Totals and destinations stay public,
    for health checks and the dashboard.  Credentials that fail get 401.

    :param live: the broker's :class:`~stompbroker.stats.sampling_services.LiveStats`.
    :param guard: the management API's :class:`~stompbroker.web.api_guard.ApiGuard`;
        ``None`` shows everything to everyone (an embedding without one).
    """

    isLeaf = True

    def __init__(self, live: LiveStats, guard: ApiGuard | None = None) -> None:
        super().__init__()
        self._live = live
        self._guard = guard

    def render_GET(self, request: Request) -> Any:
        request.setHeader(b"content-type", b"application/json")
        request.setHeader(b"cache-control", b"no-store")
        guard = self._guard
        if guard is None or guard.portal is None:
            return self._document(True)
        if request.getHeader(b"authorization") is None:
            return self._document(False)
        finished: list[bool] = []
        request.notifyFinish().addBoth(lambda _: finished.append(True))

        def identify() -> Deferred[Identity]:
            guard.check_origin(request)
            return guard.identify(request)

        answer: Deferred[Any] = maybeDeferred(identify)
        answer.addCallback(lambda who: self._document(guard.allows(who, READ, EVERYTHING)))
        answer.addErrback(self._refused, request)
        answer.addCallback(self._send, request, finished)
        return NOT_DONE_YET

    @staticmethod
    def _send(body: bytes, request: Request, finished: list[bool]) -> None:
        if not finished:
            request.write(body)
            request.finish()

    def _document(self, with_connections: bool) -> bytes:
        document = stats_document(self._live.model, self._live.latest, f"stompbroker/{__version__}")
        if not with_connections:
            document["connections"] = None
            document["connections_withheld"] = WITHHELD
        return json.dumps(document, indent=1).encode("utf-8")

    @staticmethod
    def _refused(failure: Failure, request: Request) -> bytes:
        failure.trap(ApiError)
        error = failure.value
        assert isinstance(error, ApiError)
        request.setResponseCode(error.code)
        return json.dumps(error.document()).encode("utf-8")


class MetricsPage(Resource):
    """
    ``/metrics``: the stats model in the Prometheus exposition format (or
    OpenMetrics, when the scraper asks for it).

    ``prometheus_client.twisted.MetricsResource`` is not used: it renders in the
    reactor's thread pool, where reading the broker's dicts would race the
    reactor that changes them.  This page renders on the reactor thread; a
    scrape is one pass over the destinations.

    :param live: the broker's :class:`~stompbroker.stats.sampling_services.LiveStats`.
    :param setup: the listeners and settings in force, for their info metrics.
    """

    isLeaf = True

    def __init__(self, live: LiveStats, setup: RunningSetup | None = None) -> None:
        super().__init__()
        self.registry = metrics_registry(live, setup)

    def render_GET(self, request: Request) -> bytes:
        accept = request.getHeader(b"accept")
        encoder, content_type = choose_encoder(accept.decode("latin-1") if accept else "")
        request.setHeader(b"content-type", content_type.encode("ascii"))
        request.setHeader(b"cache-control", b"no-store")
        return encoder(self.registry)


def web_root(
    broker: Any,
    reactor: IReactorTime | None = None,
    config: SessionConfig | None = None,
    *,
    websocket: WebSocketConfig | None = None,
    stats: LiveStats | None = None,
    api: ManagementApi | None = None,
    setup: RunningSetup | None = None,
) -> Resource:
    """
    The resource tree of the broker's web port.

    :param broker: the :class:`~stompbroker.broker.service.Broker` the WebSocket endpoint feeds.
    :param reactor: times heart-beats and pings; the broker's clock by default.
    :param config: per-connection STOMP settings for WebSocket clients.
    :param websocket: ping settings of the WebSocket endpoint.
    :param stats: the broker's :class:`~stompbroker.stats.sampling_services.LiveStats`,
        for ``/stats``, ``/metrics`` and ``/dashboard``; ``None`` leaves them out.
    :param api: the management API (a :class:`~stompbroker.web.api.ManagementApi`),
        served at ``/api/`` with the console at ``/console``; ``None`` leaves both out.
        Its guard also decides who sees the connections in ``/stats``.
    :param setup: the listeners and settings in force, for ``/metrics``.
    :returns: the root; add more pages with ``putChild``.
    """
    root = Resource()
    root.putChild(b"", Page(str(STATIC / "index.html")))
    root.putChild(b"static", StaticFiles(str(STATIC)))
    endpoint = stomp_websocket_resource(broker, reactor, config, websocket=websocket)
    for path in WEBSOCKET_PATHS:
        root.putChild(path, endpoint)
    root.putChild(b"healthz", HealthCheck(broker))
    if stats is not None:
        root.putChild(b"stats", StatsPage(stats, api.guard if api is not None else None))
        root.putChild(b"metrics", MetricsPage(stats, setup))
        root.putChild(b"dashboard", Page(str(STATIC / "dashboard.html")))
    if api is not None:
        root.putChild(b"api", api)
        root.putChild(b"console", Page(str(STATIC / "console.html")))
    return root


class ForwardedRequest(server.Request):
    """
    A request whose client address is the one a trusted proxy names in
    ``Forwarded`` or ``X-Forwarded-For`` (:mod:`stompbroker.transport.forwarded`),
    so that the access log and the management API's loopback check see the client.
    """

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        trusted = getattr(getattr(self.channel, "site", None), "trusted_proxies", None)
        client = self.client
        if trusted and isinstance(client, (IPv4Address, IPv6Address)):
            headers = self.requestHeaders
            host, port = client_address(
                client.host,
                client.port,
                _header_lines(headers.getRawHeaders(b"forwarded", [])),
                _header_lines(headers.getRawHeaders(b"x-forwarded-for", [])),
                trusted,
            )
            if host != client.host:
                kind = IPv6Address if ":" in host else IPv4Address
                self.client = kind("TCP", host, port)
        super().requestReceived(command, path, version)


def _header_lines(lines: Sequence[bytes]) -> list[str]:
    return [line.decode("latin-1") for line in lines]


class WebSite(Site):
    """
    A ``twisted.web`` site whose access log goes to the broker's log at debug level.

    The path is logged without its query string, which may carry credentials.

    :param trusted_proxies: the proxies whose forwarding headers name the client
        (:class:`ForwardedRequest`); nobody's by default.
    """

    noisy = False
    requestFactory = ForwardedRequest

    def __init__(
        self, resource: Any, *, trusted_proxies: TrustedProxies | None = None, **kwargs: Any
    ) -> None:
        super().__init__(resource, **kwargs)
        self.trusted_proxies = trusted_proxies or TrustedProxies()

    def log(self, request: Request) -> None:
        log.debug(
            "{method} {path} {code} {size} bytes to {peer}",
            method=request.method.decode("ascii", "replace"),
            path=request.path.decode("utf-8", "replace"),
            code=request.code,
            size=request.sentLength,
            peer=getattr(request.getClientAddress(), "host", ""),
        )
