"""
``twistd -r uvloop``: the plugin names the reactor, the module installs it.

Installing a reactor is once per process, so each check runs in a child.
"""

from __future__ import annotations

import pytest
from twisted.application.reactors import getReactorTypes

from tests.support.process import run_python


def test_twistd_knows_the_uvloop_reactor() -> None:
    """twistd lists -r uvloop, from the package's reactor plugin."""
    found = {installer.shortName: installer for installer in getReactorTypes()}
    assert found["uvloop"].moduleName == "stompbroker.app.uvloop_reactor"


@pytest.mark.integration
def test_install_runs_the_asyncio_reactor_on_a_uvloop_loop() -> None:
    """
    Installing the uvloop reactor gives Twisted's asyncio reactor, running on a uvloop event loop.
    """
    pytest.importorskip("uvloop")
    child = run_python(
        "-c",
        "from stompbroker.app import uvloop_reactor\n"
        "uvloop_reactor.install()\n"
        "from twisted.internet import reactor\n"
        "reactor.callLater(0.01, reactor.stop)\n"
        "reactor.run()\n"
        "print(type(reactor).__name__, type(reactor._asyncioEventloop).__module__)\n",
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["AsyncioSelectorReactor", "uvloop"]


@pytest.mark.integration
def test_without_uvloop_install_says_how_to_get_it() -> None:
    """Without uvloop, installing the reactor fails with a message that says how to install it."""
    child = run_python(
        "-c",
        "import sys\n"
        "sys.modules['uvloop'] = None\n"
        "from stompbroker.app import uvloop_reactor\n"
        "try:\n"
        "    uvloop_reactor.install()\n"
        "except uvloop_reactor.UvloopMissing as error:\n"
        "    print(error)\n",
    )
    assert child.returncode == 0, child.stderr
    assert "pip install uvloop" in child.stdout
