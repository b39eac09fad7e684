"""
Tests of ``twistd stompbroker``'s service wiring (:func:`stompbroker.app.tap.makeService`),
on a MemoryReactorClock.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.testing import MemoryReactorClock

from stompbroker.app.tap import makeService
from stompbroker.broker.service import Broker
from stompbroker.logs import _predicate, set_level
from stompbroker.transport.tcp import StompServerFactory
from tests.support.options import parse


def test_make_service_listens_on_every_endpoint_with_one_broker() -> None:
    """
    Every --listen endpoint gets a listener, and all feed the same broker with the given limits.
    """
    reactor = MemoryReactorClock()
    options = parse(
        "--port",
        "7000",
        "--listen",
        "tcp:7001:interface=127.0.0.1",
        "--max-frame-size",
        "1000",
        "--max-headers",
        "7",
        "--max-header-length",
        "99",
        "--max-pending-writes",
        "12",
        "--heartbeat",
        "100,200",
        "--heartbeat-min",
        "50,60",
        "--max-connections",
        "5",
        "--log-level",
        "warn",
        "--http",
        "none",
        "--data-dir",
        "none",
    )
    service = makeService(options, reactor=reactor)
    service.startService()
    try:
        ports = [(port, factory) for port, factory, *_ in reactor.tcpServers]
        assert [port for port, _ in ports] == [7000, 7001]
        factories = {id(factory) for _, factory in ports}
        assert len(factories) == 1
        factory = ports[0][1]
        assert isinstance(factory, StompServerFactory)
        assert isinstance(factory.broker, Broker)
        assert factory.broker is service.getServiceNamed("broker")
        assert factory.broker.limits.max_connections == 5
        config = factory.config
        limits = (config.max_frame_size, config.max_headers, config.max_header_length)
        assert limits == (1000, 7, 99)
        assert config.max_pending_writes == 12
        assert config.heartbeat == (100, 200)
        assert config.heartbeat_min == (50, 60)
        assert config.server_name.startswith("stompbroker/")
        assert _predicate.logLevelForNamespace("stompbroker.broker").name == "warn"
    finally:
        service.stopService()
        set_level("info")


def resume_book_of(*argv: str) -> Any:
    """:returns: the resume book the STOMP listeners of a broker made with ``argv`` share."""
    reactor = MemoryReactorClock()
    service = makeService(parse(*argv, "--http", "none", "--data-dir", "none"), reactor=reactor)
    service.startService()
    try:
        [(_, factory, *_)] = reactor.tcpServers
        return factory.config.resumption
    finally:
        service.stopService()


def test_resume_options_make_the_listeners_resume_book() -> None:
    """--resume-window and --resume-buffer size the book; a window of 0 turns resumption off."""
    book = resume_book_of("--resume-window", "30", "--resume-buffer", "2M")
    assert (book.window, book.buffer_limit) == (30.0, 2 * 1024 * 1024)
    assert resume_book_of("--resume-window", "0") is None


def test_gc_threshold_tunes_the_collector_while_the_broker_runs() -> None:
    """
    --gc-threshold sets the youngest generation's threshold and freezes startup objects;
    stopping puts both back.
    """
    import gc

    before = gc.get_threshold()
    service = makeService(
        parse("--gc-threshold", "12345", "--http", "none", "--data-dir", "none"),
        reactor=MemoryReactorClock(),
    )
    service.startService()
    try:
        assert gc.get_threshold() == (12345, 50, 100)
        assert gc.get_freeze_count() > 0
    finally:
        service.stopService()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_gc_threshold_zero_keeps_pythons_settings() -> None:
    """--gc-threshold 0 leaves the collector alone, and the default is 50 000."""
    assert parse()["gc-threshold"] == 50_000
    service = makeService(
        parse("--gc-threshold", "0", "--http", "none", "--data-dir", "none"),
        reactor=MemoryReactorClock(),
    )
    assert "gc tuning" not in {child.name for child in service}
