"""
The suite's two tiers: the quick one (``python -m pytest -m "not integration"``),
which starts no process and opens no loopback socket, and the integration
tests, which start twistd, redis-server, Spark, Chromium or haproxy, or talk to
a server over loopback.

A test is in the integration tier when it lives in ``tests/integration``, when
it uses a fixture that starts a process (:data:`PROCESS_FIXTURES`, found in the
test's whole fixture closure, so a new test of a Redis script is marked without
being told), or when its module says so (``pytestmark = pytest.mark.integration``).

A test of the quick tier that starts a process fails at that call, naming the
marker, and so does one that connects to or binds an internet socket in a run
of the quick tier alone: that is what keeps the quick tier quick and
process-free as tests are added, rather than a list someone has to remember.
An audit hook (PEP 578) sees every way in, ``subprocess``, ``os.fork``,
``os.posix_spawn`` and the socket calls, whichever library makes them.  Sockets
are watched only when no integration test runs, because a service an earlier
integration test started may connect from a finalizer at any time (py4j, the
bridge to Spark's JVM, does when a collection frees a Java object).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from attrs import define

#: Fixtures that start a process: a test that uses one, directly or through
#: another fixture, is an integration test.
PROCESS_FIXTURES = frozenset({"redis_server", "spark", "page"})

#: The integration tests' directory.
INTEGRATION = Path(__file__).resolve().parents[1] / "integration"

#: Audit events that start a process.
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn"})
#: Audit events that reach a network address.
SOCKET_EVENTS = frozenset({"socket.bind", "socket.connect"})


class QuickTestUsedTheSystem(Exception):
    """A test outside the integration tier started a process or used a network socket."""


def is_integration(item: pytest.Item) -> bool:
    """:returns: whether ``item`` belongs to the integration tier (see the module's docstring)."""
    return (
        INTEGRATION in Path(str(item.path)).parents
        or item.get_closest_marker("integration") is not None
        or not PROCESS_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
    )


@define
class QuickGuard:
    """
    The audit hook's view of the test running now: ``None`` between tests and
    during integration tests, which may do anything.

    :ivar running: the quick test running now, by node id.
    :ivar sockets: whether network sockets are refused too: in a run of quick tests only.
    """

    running: str | None = None
    sockets: bool = False

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.running is None:
            return
        if event in PROCESS_EVENTS:
            self._refuse(f"started a process ({event})")
        elif self.sockets and event in SOCKET_EVENTS and isinstance(args[1], tuple):
            self._refuse(f"used a network socket ({event} {args[1]!r})")

    def _refuse(self, what: str) -> None:
        test, self.running = self.running, None
        raise QuickTestUsedTheSystem(
            f"{test} {what} but is not marked integration: mark it"
            " (pytestmark = pytest.mark.integration), or use a fixture of"
            " tests.support.tiers.PROCESS_FIXTURES, so that the quick tier stays process-free"
        )


GUARD = QuickGuard()


def pytest_configure(config: pytest.Config) -> None:
    sys.addaudithook(GUARD)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_integration(item):
            item.add_marker(pytest.mark.integration)


def pytest_collection_finish(session: pytest.Session) -> None:
    GUARD.sockets = not any(is_integration(item) for item in session.items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    GUARD.running = None if is_integration(item) else item.nodeid
    try:
        return (yield)
    finally:
        GUARD.running = None
