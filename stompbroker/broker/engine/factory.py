"""
The one place that names the concrete engines: :func:`build_engine` makes the
engine ``--engine`` chose (or the broker's default), so that the rest of the
broker reaches engines through
:class:`~stompbroker.broker.engine.engine_interface.IEngine` only
(``tests/test_layering.py`` keeps it so).
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.engine.local import DEFAULT_POLICY, LocalEngine
from stompbroker.broker.queueing.delivery import DeliveryPolicy

__all__ = ["build_engine"]


def build_engine(
    clock: Any,
    *,
    url: Any = None,
    policy: DeliveryPolicy = DEFAULT_POLICY,
    store: Any = None,
    stream_limits: Any = None,
    node_timeout: float | None = None,
    outage_hold: float | None = None,
    ping_timeout: float | None = None,
    wait_replicas: tuple[int, float] | None = None,
    paging: Any = None,
) -> Any:
    """
    :param url: the redis engine's parsed
        :class:`~stompbroker.broker.engine.redis.url.EngineURL`, or ``None`` for
        the in-process engine.
    :param store: the in-process engine's message store (not yet open), or ``None``.
    :param paging: the in-process engine's
        :class:`~stompbroker.broker.queueing.paging.PagingBudget`, or ``None``.
    :param node_timeout: the redis engine's ``--node-timeout``; its default if ``None``.
    :param outage_hold: the redis engine's ``--engine-outage-hold``; its default if ``None``.
    :param ping_timeout: the redis engine's ``--engine-ping-timeout``; its default if ``None``.
    :param wait_replicas: the redis engine's ``--engine-wait-replicas`` and
        ``--engine-wait-timeout``; none waited for if ``None``.
    :returns: the :class:`~stompbroker.broker.engine.engine_interface.IEngine`; redis-py is
        imported only for the redis engine.
    :raises ValueError: for a store with the redis engine, which keeps its own.
    """
    if url is None:
        return LocalEngine(
            clock, policy=policy, store=store, stream_limits=stream_limits, paging=paging
        )
    if store is not None:
        raise ValueError("the redis engine keeps messages in Redis: give it no store")
    from stompbroker.broker.engine.redis.connection import Durability
    from stompbroker.broker.engine.redis.engine import DEFAULT_NODE_TIMEOUT, RedisEngine
    from stompbroker.broker.engine.redis.outage import DEFAULT_OUTAGE_HOLD
    from stompbroker.broker.engine.redis.ping import DEFAULT_PING_TIMEOUT

    return RedisEngine(
        clock,
        url,
        policy=policy,
        node_timeout=DEFAULT_NODE_TIMEOUT if node_timeout is None else node_timeout,
        stream_limits=stream_limits,
        outage_hold=DEFAULT_OUTAGE_HOLD if outage_hold is None else outage_hold,
        ping_timeout=DEFAULT_PING_TIMEOUT if ping_timeout is None else ping_timeout,
        durability=Durability() if wait_replicas is None else Durability(*wait_replicas),
    )
