"""
The services ``twistd stompbroker`` runs besides the broker's own: the start-up
ordering under which listeners wait for recovery, and the SIGHUP reload of the
access file; and how a broker that cannot start stops twistd.

They hold no option parsing and build nothing: :func:`stompbroker.app.tap.makeService`
makes them and hands them what they serve.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.error import ReactorNotRunning
from twisted.python.failure import Failure

from stompbroker.broker.engine.engine_interface import EngineUnavailable
from stompbroker.broker.service import Broker
from stompbroker.broker.store.base import StoreError
from stompbroker.logs import logger
from stompbroker.security.access_file import AccessControl, AccessFileError
from stompbroker.stats.export import ExportDirectoryError

__all__ = ["BrokerService", "ReloadOnHangup", "exit_with_error"]

log = logger("stompbroker.app.services")


class BrokerService(MultiService):
    """
    The broker and the services that serve it: the broker starts first, the
    others (its listeners) once it has recovered what its store holds, so that
    no client sees a half-rebuilt broker.

    :param broker: the :class:`~stompbroker.broker.service.Broker`; it becomes
        the first child, named ``broker``.
    :param on_failure: called with the Failure when the broker cannot recover,
        or a listener cannot start after it; twistd's stops the process.
    :param checks: called first at start, each raising
        :class:`~stompbroker.stats.export.ExportDirectoryError` for a directory the
        broker could not use (the stats directory).
    :param announce: called once every listener has started (the start-up banner).
    :raises SystemExit: from :meth:`startService`, with the store's message, when
        the data directory cannot be used (locked, damaged, not writable), or a
        check's.
    """

    def __init__(
        self,
        broker: Broker,
        on_failure: Callable[[Failure], None],
        checks: Sequence[Callable[[], None]] = (),
        announce: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.broker = broker
        self._on_failure = on_failure
        self._checks = checks
        self._announce = announce
        broker.setServiceParent(self)

    def privilegedStartService(self) -> None:
        """
        Do nothing for the listeners yet: they bind in :meth:`startService`, once
        the broker is ready (so a port below 1024 needs a user that may bind it).
        """
        Service.privilegedStartService(self)
        self.broker.privilegedStartService()

    def startService(self) -> None:
        """
        Start the broker; start the others once it is ready.  A start that cannot go
        on ends twistd with ``SystemExit``, whose message twistd writes (to the log
        too, once daemonized) and whose status is 1: said once, so not logged here.
        """
        Service.startService(self)
        try:
            for check in self._checks:
                check()
        except ExportDirectoryError as error:
            raise SystemExit(f"stompbroker: {error}") from error
        try:
            self.broker.startService()
        except EngineUnavailable as error:
            raise SystemExit(f"stompbroker: {error}") from error
        except StoreError as error:
            raise SystemExit(f"stompbroker: {error}") from error
        ready: Deferred[None] = self.broker.when_ready()
        ready.addCallback(self._start_the_others).addErrback(self._on_failure)

    def _start_the_others(self, ready: None) -> None:
        if not self.running:
            return
        for service in self:
            if service is not self.broker:
                service.startService()
        if self._announce is not None:
            self._announce()

    def stopService(self) -> Deferred[Any]:
        """Stop, in reverse order, every child that was started; the broker last."""
        Service.stopService(self)
        stopping = [
            maybeDeferred(service.stopService)
            for service in reversed(list(self))
            if service.running
        ]
        return DeferredList(stopping)


def exit_with_error(reactor: Any, failure: Failure) -> None:
    """
    Stop twistd with exit status 1, after logging why.

    twistd has no exit status of its own once its reactor runs: the process ends
    with 1 from an ``atexit`` hook, after twistd has cleaned up as usual.
    """
    log.critical("stompbroker cannot start: {error}", error=str(failure.value))
    atexit.register(_exit, 1)
    reactor.callWhenRunning(_stop, reactor)


def _stop(reactor: Any) -> None:
    """Stop the reactor, unless it is stopping already (a second failure)."""
    try:
        reactor.stop()
    except ReactorNotRunning:
        pass


def _exit(status: int) -> None:
    """End the process with ``status``, once what it printed is out."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


class ReloadOnHangup(Service):
    """
    Reloads the access file on SIGHUP; a file that became invalid is logged and
    the rules in force stay.

    :param access: the :class:`~stompbroker.security.access_file.AccessControl` sessions check.
    :param reactor: runs the reload in the reactor thread, not in the signal handler.
    """

    name = "access reload"

    def __init__(self, access: AccessControl, reactor: Any) -> None:
        self.access = access
        self._reactor = reactor
        self._previous: Any = None

    def startService(self) -> None:
        super().startService()
        self._previous = signal.signal(signal.SIGHUP, self._hangup)

    def stopService(self) -> None:
        super().stopService()
        signal.signal(signal.SIGHUP, self._previous or signal.SIG_DFL)

    def _hangup(self, signum: int, frame: types.FrameType | None) -> None:
        self._reactor.callFromThread(self.reload)

    def reload(self) -> None:
        """Read the access file again, keeping the old rules if it is invalid."""
        try:
            self.access.reload()
        except AccessFileError as error:
            log.error("access file not reloaded, the old rules stay: {error}", error=str(error))
            return
        log.info("access file {path} reloaded", path=self.access.path)
