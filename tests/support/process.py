"""
Real processes: the broker started with ``twistd -n stompbroker``, children that run
to their end, and fixtures that share one broker among several tests.

The broker launcher itself is :mod:`benchmarks.launcher`, which the benchmarks
use too (a tool run from a checkout must not import the test tree, and the tests
already import the benchmarks); this module hands it on, so that the tests find
every process helper in one place.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from benchmarks.launcher import (
    LOOPBACK_HTTP,
    ROOT,
    BrokerProcess,
    BrokerStarter,
    broker_arguments,
    free_port,
    sigkill,
    subprocess_env,
    twistd_command,
    wait_for_port,
)

__all__ = [
    "CHILD_TIMEOUT",
    "LOOPBACK_HTTP",
    "ROOT",
    "BrokerProcess",
    "BrokerStarter",
    "SharedBroker",
    "free_port",
    "module_broker",
    "run_broker_to_its_end",
    "run_python",
    "run_twistd",
    "sigkill",
    "subprocess_env",
    "twistd_command",
    "wait_for_port",
]

#: Longest a child that should end by itself may run, in seconds.
CHILD_TIMEOUT = 60.0


def run_python(
    *args: str, timeout: float = CHILD_TIMEOUT, **options: Any
) -> subprocess.CompletedProcess[str]:
    """
    Run this interpreter on the checkout's code (``-c CODE`` or ``-m MODULE ...``) to its end.

    :param options: more arguments for :func:`subprocess.run` (``cwd``, ``preexec_fn``).
    :returns: the finished child, with its output and errors as text.
    """
    return subprocess.run(
        [sys.executable, *args],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        **options,
    )


def run_twistd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """
    Run this checkout's ``twistd`` to its end.

    :returns: the finished child, with its errors in its output, as text.
    """
    return subprocess.run(
        [*twistd_command(), *args],
        cwd=cwd,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CHILD_TIMEOUT,
    )


def run_broker_to_its_end(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """
    Run ``twistd -n stompbroker`` with ``args`` as a start that is expected to fail.

    :returns: the finished twistd, its errors in its output.
    """
    return run_twistd(*broker_arguments(free_port(), None, None, *args), cwd=workdir)


def module_broker(name: str, *args: str, **options: Any) -> Any:
    """
    :param name: the fixture's name, and its directory's.
    :param args: the broker's options, as for :class:`BrokerProcess`.
    :param options: ``http`` and ``reactor``, as for :class:`BrokerProcess`.
    :returns: a fixture: one broker shared by the tests of a module, stopped after the last.
    """

    @pytest.fixture(scope="module", name=name)
    def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
        with BrokerProcess(tmp_path_factory.mktemp(name), *args, **options) as process:
            yield process

    return shared_broker


class SharedBroker:
    """
    A mixin for ``twisted.trial`` test cases: one broker, started with
    :attr:`broker_args` in a directory of its own, serves the whole class.
    """

    broker_args: ClassVar[tuple[str, ...]] = ()
    broker: ClassVar[BrokerProcess]

    @classmethod
    def setUpClass(cls) -> None:
        workdir = Path(tempfile.mkdtemp(prefix=f"stompbroker-{cls.__name__}-"))
        cls.broker = BrokerProcess(workdir, *cls.broker_args)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.broker.stop()
        shutil.rmtree(cls.broker.workdir, ignore_errors=True)
