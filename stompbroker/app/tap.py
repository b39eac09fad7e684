"""
``twistd stompbroker``: the one place that wires the broker together.

twistd's ``ServiceMaker`` (``twisted/plugins/stompbroker_plugin.py``) reads
:class:`Options` and :func:`makeService` from this module; the options are
parsed in :mod:`stompbroker.app.options`.  :func:`makeService` builds the broker
and one listening service per ``--listen`` endpoint, all feeding that broker,
under a :class:`~stompbroker.app.services.BrokerService` that starts the
listeners only once the broker has recovered its persistent messages from the
data directory.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import MultiService
from twisted.cred.credentials import IUsernamePassword
from twisted.cred.portal import Portal

from stompbroker import __version__
from stompbroker.app.banner import banner_lines, log_banner, reactor_name
from stompbroker.app.gc_tuning import CollectorTuning
from stompbroker.app.options import Options
from stompbroker.app.process_limits import raise_descriptor_limit
from stompbroker.app.services import BrokerService, ReloadOnHangup, exit_with_error
from stompbroker.app.workers import AdoptedPort, WorkerSupervisor, adopted_ports
from stompbroker.broker.engine.factory import build_engine
from stompbroker.broker.features.webhooks import Webhooks
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.management.operations import Management
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.service import Broker
from stompbroker.broker.store.sqlite import SQLiteStore
from stompbroker.logs import set_level
from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.protocol.session import SessionConfig
from stompbroker.security.credentials import IBearerToken, ICertificate
from stompbroker.security.http_auth import HttpChecker, anonymous_checker
from stompbroker.security.portal import Authenticator, make_portal
from stompbroker.stats.export import StatsExporter
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import LiveStats, StatsExport
from stompbroker.stats.setup import RunningSetup, redact_url
from stompbroker.stats.stream import StatsStream
from stompbroker.transport.coalesce import COALESCER
from stompbroker.transport.proxy_header import listening_endpoint
from stompbroker.transport.tcp import stomp_server_factory
from stompbroker.transport.websocket import WebSocketConfig
from stompbroker.web.api import ManagementApi
from stompbroker.web.api_guard import ApiGuard
from stompbroker.web.site import WebSite, web_root
from stompbroker.web.webhook_sender import WebhookSender

__all__ = ["Options", "makeService"]


def makeService(options: Options, reactor: Any | None = None) -> MultiService:
    """
    Build the broker, its STOMP listeners and its web port from parsed options.

    :param options: parsed :class:`Options`.
    :param reactor: the reactor to listen on and time with; the global one by default.
    :returns: a :class:`BrokerService` holding the broker and one listening
        service per ``--listen`` and per ``--http`` endpoint; the web ones are
        named ``http ENDPOINT`` and serve one :class:`~stompbroker.web.site.WebSite`.
        Nothing touches the data directory until the service starts (after
        twistd has daemonized).
    """
    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    set_level(options["log-level"])
    if options["workers"] > 1:
        return WorkerSupervisor(
            reactor,
            options.argv,
            [*options["listen"], *options["http"]],
            options["workers"],
            _asyncio_reactor_name(reactor),
            options["shutdown-timeout"],
        )
    policy = DeliveryPolicy(
        prefetch=options["prefetch"],
        max_redeliveries=options["max-redeliveries"],
        dead_letter_prefix=options["dead-letter-prefix"],
        expired=options["expired"],
        ttl=options["ttl"],
        backoff=options["backoff"],
    )
    store = None
    engine = _engine(options, reactor, policy)
    if engine is None and options["data-dir"] != "none":
        data_dir = Path(options["data-dir"]).absolute()
        # The broker closes the store when twistd stops it, after its clients.
        # What a commit releases (RECEIPTs, deliveries) reaches no connection's
        # read: gather each connection's frames of it into one write, as a read's are.
        store = SQLiteStore(
            data_dir,
            reactor=reactor,
            sync=options["sync"],
            close_at_shutdown=False,
            settle_together=COALESCER.handle,
        )
    broker = Broker(
        reactor,
        limits=Limits(
            max_connections=options["max-connections"],
            max_connections_per_address=options["max-connections-per-address"],
            max_transactions=options["max-transactions"],
            max_transaction_frames=options["max-transaction-frames"],
            memory_high=options["memory-high"],
            memory_low=options["memory-low"],
            disk_free_limit=options["disk-free-limit"],
            shutdown_timeout=options["shutdown-timeout"],
            queue_memory=options["queue-memory"],
            read_ahead=options["read-ahead"],
        ),
        policy=policy,
        store=store,
        persistent_queues=options["persistent-queues"],
        engine=engine,
        stream_limits=None if engine is not None else options["stream-limits"],
        rate_limits=options["rate-limits"],
        virtual_hosts=options["virtual-hosts"],
        policies=options["policies"],
    )
    exporter = None
    if options["stats-dir"] is not None:
        exporter = StatsExporter(Path(options["stats-dir"]).absolute(), reactor.seconds)
    top = BrokerService(
        broker,
        on_failure=lambda failure: exit_with_error(reactor, failure),
        checks=[exporter.check] if exporter is not None else [],
        announce=partial(log_banner, banner_lines(options, reactor)),
    )
    resumption = None
    if options["resume-window"]:
        # One book for every listener: a client may drop over one and come back over another.
        resumption = ResumeBook(reactor, options["resume-window"], options["resume-buffer"])
        broker.keep_resumable_sessions(resumption)
    config = SessionConfig(
        server_name=f"stompbroker/{__version__}",
        heartbeat=options["heartbeat"],
        heartbeat_min=options["heartbeat-min"],
        max_frame_size=options["max-frame-size"],
        max_headers=options["max-headers"],
        max_header_length=options["max-header-length"],
        authenticator=_authenticator(options, reactor),
        access=options["access-control"],
        max_subscriptions=options["max-subscriptions"],
        max_pending_writes=options["max-pending-writes"],
        connect_timeout=options["connect-timeout"],
        frame_timeout=options["frame-timeout"],
        slow_consumer_policy=options["slow-consumer"],
        slow_consumer_buffer=options["slow-consumer-buffer"],
        resumption=resumption,
    )
    if options["webhook"] is not None:
        broker.presence.webhooks = Webhooks(
            WebhookSender(options["webhook"], reactor), options["webhook-secret"], reactor
        )
    if resumption is not None:
        # With a shared engine, a client may resume on any of its nodes.
        broker.engine.share_resumption(resumption)
    if options["access"] is not None:
        ReloadOnHangup(options["access-control"], reactor).setServiceParent(top)
    raise_descriptor_limit(options["max-connections"])
    factory = stomp_server_factory(broker, reactor, config)
    # The banner says what listens where; not "Starting factory <... object at 0x...>".
    factory.noisy = False
    adopted = adopted_ports()
    for description in options["listen"]:
        _listen(top, reactor, f"stomp {description}", description, factory, adopted)
    live = _add_stats(top, broker, reactor, options, exporter)
    if options["gc-threshold"]:
        # A child like the listeners: it starts once recovery is over.
        CollectorTuning(options["gc-threshold"]).setServiceParent(top)
    if options["http"]:
        websocket = WebSocketConfig(
            ping_interval=options["ws-ping-interval"],
            ping_timeout=options["ws-ping-timeout"],
            compression=options["ws-compression-settings"],
            trusted_proxies=options["trusted-proxies"],
            allowed_origins=options["allowed-origins"],
        )
        setup = running_setup(options)
        guard = ApiGuard(
            _api_portal(options),
            options["access-control"],
            reactor,
            allowed_origins=options["allowed-origins"],
        )
        api = ManagementApi(
            Management(broker),
            guard,
            live,
            setup,
        )
        root = web_root(
            broker, reactor, config, websocket=websocket, stats=live, api=api, setup=setup
        )
        site = WebSite(root, reactor=reactor, trusted_proxies=options["trusted-proxies"])
        for description in options["http"]:
            _listen(top, reactor, f"http {description}", description, site, adopted)
    return top


def _engine(options: Options, reactor: Any, policy: DeliveryPolicy) -> Any:
    """
    :returns: the redis engine that ``--engine`` names, or ``None`` for the
        broker's own (memory) engine; redis-py is imported only here.
    """
    url = options["engine-url"]
    if url is None:
        return None
    engine = build_engine(
        reactor,
        url=url,
        policy=policy,
        node_timeout=options["node-timeout"],
        outage_hold=options["engine-outage-hold"],
        ping_timeout=options["engine-ping-timeout"],
        wait_replicas=(options["engine-wait-replicas"], options["engine-wait-timeout"]),
        stream_limits=options["stream-limits"],
    )
    # What other nodes publish reaches no connection's read: gather each
    # connection's frames of a batch into one write, as a read's are.
    engine.deliver_together = COALESCER.handle
    return engine


def _asyncio_reactor_name(reactor: Any) -> str:
    """:returns: the ``--reactor`` of workers: the supervisor's own, if it is uvloop."""
    return "uvloop" if reactor_name(reactor) == "uvloop" else "asyncio"


def _authenticator(options: Options, reactor: Any) -> Authenticator | None:
    """
    :returns: what sessions log clients in with: a portal over the ``--auth``
        checkers, or with ``--access`` alone one that lets everyone in
        anonymously (the access file's ``[anonymous]`` rules then apply);
        ``None`` without either, so that CONNECT costs nothing more.  With
        ``--allow-anonymous``, no ``--access`` and an ``--auth http:``
        application, clients without a login get the rights that application
        decides (:class:`~stompbroker.security.http_auth.HttpAnonymousChecker`).
    """
    checkers = list(options.get("credCheckers", []))
    if not checkers and options["access-control"] is None:
        return None
    if options["allow-anonymous"] and options["access"] is None:
        # No [anonymous] rules: an --auth http application decides for them.
        anonymous = anonymous_checker(checkers)
        if anonymous is not None:
            checkers.append(anonymous)
    return Authenticator(make_portal(checkers, options["allow-anonymous"]), reactor)


#: Options that are not settings an operator reads: what holds credentials or
#: objects, the listeners (shown apart), and the parsed copies of other options.
_NOT_SETTINGS = frozenset(
    ("credCheckers", "credInterfaces", "access-control", "listen", "http", "stream-limits")
)
#: The unit of each setting that has one, for the pages that show them.
_SETTING_UNITS = {
    **dict.fromkeys(
        (
            "max-frame-size",
            "memory-high",
            "memory-low",
            "queue-memory",
            "resume-buffer",
            "slow-consumer-buffer",
            "ws-compression-min-size",
        ),
        "bytes",
    ),
    **dict.fromkeys(
        (
            "connect-timeout",
            "engine-outage-hold",
            "engine-ping-timeout",
            "engine-wait-timeout",
            "frame-timeout",
            "monitor-interval",
            "node-timeout",
            "resume-window",
            "shutdown-timeout",
            "stats-interval",
            "ws-ping-interval",
            "ws-ping-timeout",
        ),
        "s",
    ),
    **dict.fromkeys(("redelivery-delay", "redelivery-max-delay", "ttl"), "ms"),
}
#: The kind of login each credential interface of ``--auth`` takes.
_LOGINS = ((IUsernamePassword, "password"), (IBearerToken, "token"), (ICertificate, "certificate"))


def running_setup(options: Options) -> RunningSetup:
    """
    :returns: the listeners and the settings in force, for operators: every
        option with a plain value, the engine URL without its password, and for
        ``--auth`` only the kinds of login it takes (never its checkers' arguments).
    """
    settings: list[tuple[str, Any]] = []
    for name, value in options.items():
        if name in _NOT_SETTINGS or not isinstance(value, (str, int, float, tuple, type(None))):
            continue
        if name == "policies" and isinstance(value, tuple):
            # Named only: each is on the policies page and /api/policies in full.
            value = tuple(policy.name for policy in value)
        settings.append((name, redact_url(value) if isinstance(value, str) else value))
    interfaces = options.get("credInterfaces", {})
    logins = tuple(kind for interface, kind in _LOGINS if interface in interfaces)
    settings.append(("auth", logins or None))
    listeners = [("stomp", description) for description in options["listen"]]
    listeners += [("http", description) for description in options["http"]]
    return RunningSetup.of(listeners, settings, _SETTING_UNITS)


def _api_portal(options: Options) -> Portal | None:
    """
    :returns: the portal the management API checks Basic credentials with: the
        ``--auth`` password checkers (never anonymous access); ``None`` without
        any, and the API then answers loopback clients only.
    """
    checkers = [
        checker
        for checker in options.get("credCheckers", [])
        if IUsernamePassword in checker.credentialInterfaces
    ]
    return make_portal(checkers) if checkers else None


def _add_stats(
    top: MultiService,
    broker: Broker,
    reactor: Any,
    options: Options,
    exporter: StatsExporter | None,
) -> LiveStats:
    """
    Add the statistics services to ``top``: the live one, and with ``--stats-dir``
    (``exporter``) the export.

    :returns: the live service, which the web port's stats pages read.
    """
    authorization = [
        checker.endpoint.figures
        for checker in options.get("credCheckers", [])
        if isinstance(checker, HttpChecker)
    ]
    model = StatsModel(broker, reactor, authorization=authorization)
    live = LiveStats(model, options["monitor-interval"])
    live.setServiceParent(top)
    if exporter is not None:
        StatsExport(model, exporter, options["stats-interval"]).setServiceParent(top)
    if options["stats-stream"] is not None:
        StatsStream(model, options["stats-stream"], options["stats-interval"]).setServiceParent(top)
    return live


def _listen(
    top: MultiService,
    reactor: Any,
    name: str,
    description: str,
    factory: Any,
    adopted: dict[str, tuple[int, int]],
) -> None:
    """
    Add a service to ``top`` that listens on the endpoint ``description`` with
    ``factory``: on the socket a ``--workers`` supervisor handed down for it, if
    it did (``adopted``), else on a port of its own.
    """
    if description in adopted:
        fd, family = adopted[description]
        service = AdoptedPort(reactor, fd, family, factory)
        service.setName(name)
        service.setServiceParent(top)
        return
    endpoint = listening_endpoint(reactor, description)
    listener = StreamServerEndpointService(endpoint, factory)
    listener._raiseSynchronously = True
    listener.setName(name)
    listener.setServiceParent(top)
