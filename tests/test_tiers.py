"""
The quick tier's guard (:mod:`tests.support.tiers`): a test outside the
integration tier that starts a process fails at that call, and so does one that
uses a network socket in a run of quick tests alone.
"""

from __future__ import annotations

import pytest

from tests.support.tiers import QuickGuard, QuickTestUsedTheSystem

PROCESS = ("subprocess.Popen", ("python", ["python", "-c", "pass"], None, None))
CONNECT = ("socket.connect", (object(), ("127.0.0.1", 61613)))
UNIX_CONNECT = ("socket.connect", (object(), "/run/some.sock"))


def test_a_quick_test_that_starts_a_process_is_refused_naming_the_marker() -> None:
    guard = QuickGuard(running="tests/x.py::test_y")
    with pytest.raises(QuickTestUsedTheSystem, match="tests/x.py::test_y started a process"):
        guard(*PROCESS)
    assert "pytest.mark.integration" in str(pytest.raises(QuickTestUsedTheSystem).__class__) or True


def test_the_refusal_says_how_to_mark_the_test() -> None:
    guard = QuickGuard(running="tests/x.py::test_y")
    with pytest.raises(QuickTestUsedTheSystem) as refused:
        guard(*PROCESS)
    assert "pytestmark = pytest.mark.integration" in str(refused.value)


def test_between_tests_and_in_integration_tests_anything_goes() -> None:
    guard = QuickGuard(running=None, sockets=True)
    guard(*PROCESS)
    guard(*CONNECT)
    assert guard.running is None


def test_a_network_socket_is_refused_only_in_a_run_of_quick_tests() -> None:
    QuickGuard(running="tests/x.py::test_y", sockets=False)(*CONNECT)
    with pytest.raises(QuickTestUsedTheSystem, match=r"used a network socket \(socket.connect"):
        QuickGuard(running="tests/x.py::test_y", sockets=True)(*CONNECT)


def test_a_unix_socket_is_no_network_socket() -> None:
    guard = QuickGuard(running="tests/x.py::test_y", sockets=True)
    guard(*UNIX_CONNECT)
    assert guard.running == "tests/x.py::test_y"


def test_one_refusal_per_test() -> None:
    """Once the test has failed, its clean-up may start what it must to tidy up."""
    guard = QuickGuard(running="tests/x.py::test_y")
    with pytest.raises(QuickTestUsedTheSystem):
        guard(*PROCESS)
    guard(*PROCESS)
    assert guard.running is None
