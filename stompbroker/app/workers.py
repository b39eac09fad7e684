"""
``--workers N``: N broker processes on one machine behind the same listening
ports, each a node of the redis engine's cluster.

The process twistd starts becomes a supervisor (:class:`WorkerSupervisor`) and
runs no broker itself:

- it binds every ``--listen`` and ``--http`` port (plain ``tcp:``/``tcp6:``
  endpoints), in ``privilegedStartService`` so that a port below 1024 works
  before twistd drops privileges, and never accepts on them;
- it starts N workers, ``twistd -n stompbroker`` with the same options but
  ``--workers``, each given the listening sockets as inherited descriptors
  (``spawnProcess``'s ``childFDs``) and told which is which in the
  ``STOMPBROKER_ADOPT`` environment variable;
- a worker adopts each socket (``reactor.adoptStreamPort``,
  :class:`AdoptedPort`) in place of binding it, so the kernel hands each new
  connection to whichever worker accepts first;
- a worker that dies is started again after a back-off (1 s doubling to 30 s
  while it keeps dying within a minute), and stopping the supervisor (SIGTERM)
  stops the workers (SIGTERM, SIGKILL after ``--shutdown-timeout`` and 5 s
  more);
- a worker that exits with an error status (not killed by a signal) within
  :data:`FIRST_START` seconds of its first start could not start at all (it has
  logged why): the supervisor then stops the
  others and exits with status 1, as a broker of one process that cannot start
  does.

Each worker is a node of its own (its own node token), so the workers share
destinations through the redis engine exactly as nodes on several machines do;
with the memory engine each would be a broker of its own, which is why
``--workers`` needs ``--engine redis://...``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

from twisted.application.service import MultiService, Service
from twisted.internet import endpoints, protocol
from twisted.internet.address import IPv6Address
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred, succeed
from twisted.internet.error import ProcessExitedAlready, ProcessTerminated
from twisted.internet.process import reapAllProcesses
from twisted.internet.task import LoopingCall
from twisted.python.failure import Failure

from stompbroker.app.services import exit_with_error
from stompbroker.logs import logger

__all__ = ["ADOPT_VARIABLE", "AdoptedPort", "WorkerSupervisor", "adopted_ports", "worker_argv"]

log = logger("stompbroker.app")

#: The environment variable that tells a worker which inherited descriptor
#: listens for which endpoint: JSON ``{description: [fd, family]}``.
ADOPT_VARIABLE = "STOMPBROKER_ADOPT"
#: The endpoint kinds a supervisor can share: plain TCP.
SHARED_KINDS = ("tcp", "tcp6")
#: Seconds before a worker that died is started again, doubling up to RESTART_CAP.
RESTART_DELAY = 1.0
RESTART_CAP = 30.0
#: A worker that lived this long resets its back-off.
STABLE_AFTER = 60.0
#: A worker that ends this soon after its first start could not start (a bad
#: --engine URL, a refused password): the supervisor stops rather than retry.
FIRST_START = 10.0
#: Seconds between two looks for workers that ended: uvloop's loop does not
#: pass SIGCHLD on to Twisted, so the supervisor reaps them itself.
REAP_INTERVAL = 0.5


class WorkerFailed(Exception):
    """A worker could not start: the supervisor stops."""


def shareable(description: str) -> bool:
    """:returns: whether ``--workers`` can share an endpoint (a plain TCP one)."""
    return description.split(":", 1)[0] in SHARED_KINDS


def worker_argv(argv: list[str]) -> list[str]:
    """
    :returns: the plugin's options with ``--workers 1`` in place of the
        supervisor's (a worker is one process, whatever a ``--config`` file says).
    """
    kept: list[str] = []
    skip = False
    for argument in argv:
        if skip:
            skip = False
            continue
        if argument == "--workers":
            skip = True
            continue
        if argument.startswith("--workers="):
            continue
        kept.append(argument)
    return [*kept, "--workers=1"]


def adopted_ports(environ: Any = os.environ) -> dict[str, tuple[int, int]]:
    """
    :returns: description -> (descriptor, address family) of the sockets this
        process inherited from a supervisor; empty for a process of its own.
    """
    text = environ.get(ADOPT_VARIABLE)
    if not text:
        return {}
    return {
        description: (int(fd), int(family))
        for description, (fd, family) in json.loads(text).items()
    }


class AdoptedPort(Service):
    """
    Accept connections on a listening socket a supervisor bound and handed down.

    :param reactor: an ``IReactorSocket``.
    :param fd: the inherited descriptor.
    :param family: its address family.
    :param factory: the protocol factory, as for a port of one's own.
    """

    def __init__(self, reactor: Any, fd: int, family: int, factory: Any) -> None:
        self._reactor = reactor
        self._fd = fd
        self._family = family
        self._factory = factory
        self._port: Any = None

    def startService(self) -> None:
        """Start accepting on the socket."""
        super().startService()
        self._port = self._reactor.adoptStreamPort(self._fd, self._family, self._factory)

    def stopService(self) -> Deferred[Any]:
        """Stop accepting (the supervisor keeps the socket for the other workers)."""
        super().stopService()
        port, self._port = self._port, None
        return succeed(None) if port is None else maybeDeferred(port.stopListening)


class _Worker(protocol.ProcessProtocol):
    """One worker process: tells the supervisor when it ends."""

    def __init__(
        self, supervisor: WorkerSupervisor, index: int, started: float, first: bool
    ) -> None:
        self.supervisor = supervisor
        self.index = index
        self.started = started
        self.first = first
        self.ended: Deferred[None] = Deferred()

    def processEnded(self, reason: Any) -> None:
        self.ended.callback(None)
        self.supervisor.ended(self, reason)


class WorkerSupervisor(MultiService):
    """
    Binds the ports, runs ``count`` workers on them, and starts again those that die.

    :param reactor: the reactor.
    :param argv: the plugin's options as given (``--workers`` is dropped for the workers).
    :param descriptions: the ``--listen`` and ``--http`` endpoints, all plain TCP.
    :param count: how many workers.
    :param reactor_name: the workers' ``--reactor`` (``uvloop`` or ``asyncio``).
    :param stop_timeout: seconds a stopping worker may take before it is killed.
    """

    def __init__(
        self,
        reactor: Any,
        argv: list[str],
        descriptions: list[str],
        count: int,
        reactor_name: str,
        stop_timeout: float,
    ) -> None:
        super().__init__()
        self._reactor = reactor
        self._argv = worker_argv(argv)
        self._descriptions = descriptions
        self._count = count
        self._reactor_name = reactor_name
        self._stop_timeout = stop_timeout
        self._ports: dict[str, Any] = {}
        self._workers: dict[int, Any] = {}
        self._protocols: dict[int, _Worker] = {}
        self._delays: dict[int, float] = {}
        self._failed = False
        self._reaper = LoopingCall(reapAllProcesses)
        self._reaper.clock = reactor

    def privilegedStartService(self) -> None:
        """Bind every port now (before twistd gives up privileges); accept on none."""
        super().privilegedStartService()
        for description in self._descriptions:
            bound: list[Any] = []
            # It never accepts: a quiet factory (no "Starting factory <... at 0x...>").
            quiet = protocol.Factory()
            quiet.noisy = False
            listening = endpoints.serverFromString(self._reactor, description).listen(quiet)
            listening.addCallback(bound.append)
            # A TCP endpoint listens at once; a failure to bind raises here.
            if not bound:
                failures: list[Any] = []
                listening.addErrback(failures.append)
                if failures:
                    failures[0].raiseException()
            port = bound[0]
            port.stopReading()
            self._ports[description] = port

    def startService(self) -> None:
        """Start the workers."""
        super().startService()
        for index in range(self._count):
            self._spawn(index)
        self._reaper.start(REAP_INTERVAL, now=False)
        log.info(
            "supervising {count} workers on {ports}",
            count=self._count,
            ports=", ".join(self._descriptions),
        )

    def _adopt(self) -> dict[str, list[int]]:
        adopt = {}
        for description, port in self._ports.items():
            family = socket.AF_INET6 if isinstance(port.getHost(), IPv6Address) else socket.AF_INET
            adopt[description] = [port.fileno(), int(family)]
        return adopt

    def _spawn(self, index: int) -> None:
        adopt = self._adopt()
        environ = dict(os.environ)
        environ[ADOPT_VARIABLE] = json.dumps(adopt)
        child_fds: dict[int, Any] = {0: 0, 1: 1, 2: 2}
        for fd, _ in adopt.values():
            child_fds[fd] = fd
        worker = _Worker(self, index, self._reactor.seconds(), index not in self._delays)
        command = [
            sys.executable,
            "-c",
            "from twisted.scripts.twistd import run; run()",
            "--nodaemon",
            "--pidfile=",
            "--logfile=-",
            f"--reactor={self._reactor_name}",
            "stompbroker",
            *self._argv,
        ]
        self._protocols[index] = worker
        self._workers[index] = self._reactor.spawnProcess(
            worker, sys.executable, command, env=environ, childFDs=child_fds
        )
        log.info("started worker {index} (pid {pid})", index=index, pid=self._workers[index].pid)

    def ended(self, worker: _Worker, reason: Any) -> None:
        """A worker ended: start it again after a back-off, unless we are stopping."""
        self._workers.pop(worker.index, None)
        if not self.running:
            return
        lived = self._reactor.seconds() - worker.started
        failed = reason.check(ProcessTerminated) and reason.value.exitCode
        if self._failed:
            # The first worker that could not start stopped the supervisor; the
            # others end for the same reason, which is logged once.
            return
        if worker.first and lived < FIRST_START and failed:
            self._failed = True
            exit_with_error(
                self._reactor,
                Failure(
                    WorkerFailed(
                        f"worker {worker.index} ended {lived:.1f} s after it started"
                        f" ({reason.getErrorMessage()}); its log above says why"
                    )
                ),
            )
            return
        delay = RESTART_DELAY
        if lived < STABLE_AFTER:
            delay = min(self._delays.get(worker.index, RESTART_DELAY / 2) * 2, RESTART_CAP)
        self._delays[worker.index] = delay
        log.warn(
            "worker {index} ended ({reason}); starting it again in {delay} s",
            index=worker.index,
            reason=reason.getErrorMessage(),
            delay=delay,
        )
        self._reactor.callLater(delay, self._respawn, worker.index)

    def _respawn(self, index: int) -> None:
        if self.running and index not in self._workers:
            self._spawn(index)

    def stopService(self) -> Deferred[Any]:
        """Stop the workers (SIGTERM, then SIGKILL if they linger), then close the ports."""
        super().stopService()
        ends = []
        for index, process in list(self._workers.items()):
            ends.append(self._protocols[index].ended)
            _signal(process, "TERM")
            self._reactor.callLater(self._stop_timeout + 5, _signal, process, "KILL")
        done: Deferred[Any] = DeferredList(ends)
        return done.addCallback(self._close_ports)

    def _close_ports(self, _: Any) -> Deferred[Any]:
        if self._reaper.running:
            self._reaper.stop()
        closing = [port.stopListening() for port in self._ports.values()]
        self._ports.clear()
        return DeferredList([d for d in closing if d is not None])


def _signal(process: Any, name: str) -> None:
    """Signal a worker that may have ended meanwhile."""
    try:
        process.signalProcess(name)
    except (OSError, ProcessExitedAlready):
        pass
