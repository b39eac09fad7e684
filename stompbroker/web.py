"""
The broker's web site: one HTTP port for browsers, health checks and, later, statistics.

=============  ==================================================================
path           what it serves
=============  ==================================================================
``/``          a demo page: connect, subscribe, send, watch messages arrive
``/static/``   the demo's script and the vendored ``@stomp/stompjs`` release
``/ws``        STOMP over WebSocket (:mod:`stompbroker.transport.websocket`)
``/stomp``     the same endpoint, under the name some clients expect
``/healthz``   ``200 {"status": "ok"}`` while the broker runs, ``503`` otherwise
=============  ==================================================================

:func:`web_root` builds a plain ``twisted.web`` resource tree, so that later
features (``/stats``, ``/metrics``, ``/dashboard``) hang their own resources
on it with ``putChild``; :class:`WebSite` serves any such tree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.web.http import Request
from twisted.web.pages import notFound
from twisted.web.resource import IResource, Resource
from twisted.web.server import Site
from twisted.web.static import File

from stompbroker.logs import logger
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.websocket import WebSocketConfig, stomp_websocket_resource

log = logger("stompbroker.web")

#: The package's static files: the demo page and the vendored stompjs.
STATIC = Path(__file__).parent / "static"

#: The paths the WebSocket endpoint answers on.
WEBSOCKET_PATHS = (b"ws", b"stomp")


class StaticFiles(File):
    """Files under a folder of the package, with neither index pages nor directory listings."""

    indexNames: list[str] = []

    def directoryListing(self) -> IResource:
        return notFound()


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


def web_root(
    broker: Any,
    reactor: Optional[IReactorTime] = None,
    config: Optional[SessionConfig] = None,
    *,
    websocket: Optional[WebSocketConfig] = None,
) -> Resource:
    """
    The resource tree of the broker's web port.

    :param broker: the :class:`~stompbroker.broker.service.Broker` the WebSocket endpoint feeds.
    :param reactor: times heart-beats and pings; the broker's clock by default.
    :param config: per-connection STOMP settings for WebSocket clients.
    :param websocket: ping settings of the WebSocket endpoint.
    :returns: the root; add more pages with ``putChild``.
    """
    root = Resource()
    root.putChild(b"", StaticFiles(str(STATIC / "index.html")))
    root.putChild(b"static", StaticFiles(str(STATIC)))
    endpoint = stomp_websocket_resource(broker, reactor, config, websocket=websocket)
    for path in WEBSOCKET_PATHS:
        root.putChild(path, endpoint)
    root.putChild(b"healthz", HealthCheck(broker))
    return root


class WebSite(Site):
    """
    A ``twisted.web`` site whose access log goes to the broker's log at debug level.

    The path is logged without its query string, which may carry credentials.
    """

    noisy = False

    def log(self, request: Request) -> None:
        log.debug(
            "{method} {path} {code} {size} bytes to {peer}",
            method=request.method.decode("ascii", "replace"),
            path=request.path.decode("utf-8", "replace"),
            code=request.code,
            size=request.sentLength,
            peer=getattr(request.getClientAddress(), "host", ""),
        )
