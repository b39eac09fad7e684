"""
The broker's loggers, behind one level filter that ``--log-level`` sets.

twistd owns the global log observers, so the level cannot be set there; instead
every logger of ours publishes through a :class:`FilteringLogObserver` whose
predicate is keyed on the ``stompbroker`` namespace.
"""

from __future__ import annotations

from twisted.logger import (
    FilteringLogObserver,
    Logger,
    LogLevel,
    LogLevelFilterPredicate,
    globalLogPublisher,
)

LEVELS: dict[str, LogLevel] = {level.name: level for level in LogLevel.iterconstants()}

_predicate = LogLevelFilterPredicate(defaultLogLevel=LogLevel.info)
_observer = FilteringLogObserver(globalLogPublisher, [_predicate])


def logger(namespace: str) -> Logger:
    """
    :param namespace: a dotted name under ``stompbroker``.
    :returns: a logger whose events pass the ``--log-level`` filter.
    """
    return Logger(namespace=namespace, observer=_observer)


def set_level(name: str) -> None:
    """
    Set the lowest level logged by the broker.

    :param name: one of ``debug``, ``info``, ``warn``, ``error``, ``critical``.
    :raises ValueError: for another name.
    """
    try:
        level = LEVELS[name]
    except KeyError:
        raise ValueError(f"unknown log level {name!r}; use one of {', '.join(LEVELS)}") from None
    _predicate.setLogLevelForNamespace("stompbroker", level)
