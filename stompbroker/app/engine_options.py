"""
The options that choose where destinations' state lives: ``--engine``,
``--engine-password-file``, ``--engine-sentinel-password-file``,
``--engine-outage-hold``, ``--engine-ping-timeout``, ``--engine-wait-replicas``,
``--engine-wait-timeout``,
``--node-timeout`` and ``--workers``.

:class:`EngineOptions` is a mixin of :class:`stompbroker.app.options.Options`
(twistd gathers ``optParameters`` along the class hierarchy); it parses and
checks, and :func:`stompbroker.app.tap.makeService` builds the engine.
"""

from __future__ import annotations

from twisted.python import usage

from stompbroker.app.option_values import named, number, whole_number
from stompbroker.app.workers import shareable
from stompbroker.broker.engine.redis.url import MEMORY, EngineURLError, parse_engine

__all__ = ["DEFAULT_NODE_TIMEOUT", "EngineOptions"]

#: Seconds; the redis engine's own default (kept here so that the options need no redis-py).
DEFAULT_NODE_TIMEOUT = 10.0
#: Seconds; the redis engine's :data:`~stompbroker.broker.engine.redis.outage.DEFAULT_OUTAGE_HOLD`.
DEFAULT_OUTAGE_HOLD = 30.0
#: Seconds; the redis engine's :data:`~stompbroker.broker.engine.redis.ping.DEFAULT_PING_TIMEOUT`.
DEFAULT_PING_TIMEOUT = 5.0


def _node_timeout(text: str) -> float:
    value = number(text)
    if not 0.5 <= value < float("inf"):
        raise ValueError(f"must be 0.5 seconds or more, got {text!r}")
    return value


def _outage_hold(text: str) -> float:
    value = number(text)
    if not 0 <= value < float("inf"):
        raise ValueError(f"must be 0 seconds or more, got {text!r}")
    return value


def _ping_timeout(text: str) -> float:
    value = number(text)
    if not 0.1 <= value < float("inf"):
        raise ValueError(f"must be 0.1 seconds or more, got {text!r}")
    return value


def _wait_timeout(text: str) -> float:
    value = number(text)
    if not 0.001 <= value < float("inf"):
        raise ValueError(f"must be 0.001 seconds or more, got {text!r}")
    return value


def _wait_replicas(text: str) -> int:
    value = whole_number(text)
    if value < 0:
        raise ValueError(f"must be 0 or more, got {text!r}")
    return value


def _workers(text: str) -> int:
    value = whole_number(text)
    if value < 1:
        raise ValueError(f"must be 1 or more, got {text!r}")
    return value


def _require_redis() -> None:
    """
    :raises usage.UsageError: when redis-py, which the redis engine needs, is not installed.
    """
    try:
        import redis  # noqa: F401
    except ImportError:
        raise usage.UsageError(
            "--engine redis://... needs the redis package: pip install redis "
            "(or 'stompbroker[redis]' from PyPI, '.[redis]' in a checkout)"
        ) from None


class EngineOptions(usage.Options):
    """``--engine`` and its companions; ``engine-url`` holds the parsed URL (or ``None``)."""

    optParameters = [
        [
            "engine",
            None,
            MEMORY,
            "Where destinations live: 'memory' (this process, persistent messages in "
            "--data-dir) or redis://HOST:PORT/DB (rediss:// for TLS; a password as "
            "redis://:PASSWORD@HOST or ?password_file=PATH), or "
            "redis+sentinel://HOST:PORT,HOST:PORT/MASTER/DB to follow Sentinel's primary: "
            "every broker started with the same URL is one broker (docs/cluster.md). Needs "
            "-r uvloop or -r asyncio.",
        ],
        [
            "engine-password-file",
            None,
            None,
            "A file whose first line is the Redis password (instead of one in the URL).",
        ],
        [
            "engine-sentinel-password-file",
            None,
            None,
            "With --engine redis+sentinel://: a file whose first line is the Sentinels' own"
            " password, if they need one (the URL's password is the Redis servers').",
        ],
        [
            "engine-outage-hold",
            None,
            DEFAULT_OUTAGE_HOLD,
            "With --engine redis: seconds to hold publishers (paused, their receipts and"
            " acknowledgements' receipts waiting) while Redis is away; past it they get an"
            " ERROR that says Redis is unreachable. 0: the ERROR at once.",
            _outage_hold,
        ],
        [
            "engine-ping-timeout",
            None,
            DEFAULT_PING_TIMEOUT,
            "With --engine redis: seconds Redis may take to answer a PING, sent on a"
            " connection of its own while a pipeline's replies are slow, before it counts as"
            " away (--engine-outage-hold). A Redis that answers, however slowly, is load:"
            " publishers are slowed, never sent an ERROR.",
            _ping_timeout,
        ],
        [
            "engine-wait-replicas",
            None,
            0,
            "With --engine redis: a persistent SEND's RECEIPT waits until this many Redis"
            " replicas have the message (Redis's WAIT, once per pipeline); fewer within"
            " --engine-wait-timeout: an ERROR 'message not replicated'. 0: the primary's"
            " answer is enough.",
            _wait_replicas,
        ],
        [
            "engine-wait-timeout",
            None,
            1.0,
            "With --engine-wait-replicas: seconds to wait for the replicas.",
            _wait_timeout,
        ],
        [
            "node-timeout",
            None,
            DEFAULT_NODE_TIMEOUT,
            "With --engine redis: seconds after which a node that stopped answering counts "
            "as dead, and what its consumers held goes to other nodes' consumers.",
            _node_timeout,
        ],
        [
            "workers",
            None,
            1,
            "Broker processes on this machine behind the same plain TCP ports, each a node"
            " of the cluster (needs --engine redis; docs/cluster.md).",
            _workers,
        ],
    ]
    optParameters = named(optParameters)

    def check_engine(self) -> None:
        """
        Read ``--engine`` into ``engine-url``, and refuse what it cannot go with.

        :raises usage.UsageError: with what is wrong.
        """
        try:
            url = parse_engine(
                self["engine"],
                self["engine-password-file"],
                self["engine-sentinel-password-file"],
            )
        except EngineURLError as error:
            raise usage.UsageError(str(error)) from None
        self["engine-url"] = url
        if url is not None:
            _require_redis()
        if url is None:
            if self["workers"] > 1:
                raise usage.UsageError(
                    "--workers above 1 needs --engine redis://...: with the memory engine each"
                    " process would be a broker of its own, with its own queues and topics"
                )

    def check_workers(self, descriptions: list[str]) -> None:
        """
        Refuse ``--workers`` above 1 on endpoints the workers cannot share.

        :param descriptions: the ``--listen`` and ``--http`` endpoints.
        :raises usage.UsageError: for one that is not plain TCP.
        """
        if self["workers"] <= 1:
            return
        for description in descriptions:
            if not shareable(description):
                raise usage.UsageError(
                    f"--workers above 1 shares plain TCP ports only (tcp: or tcp6:), not"
                    f" {description!r}: put TLS in front (a load balancer or stunnel), or run"
                    " one twistd per core with ports of their own (docs/cluster.md)"
                )
