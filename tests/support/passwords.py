"""
What the tests of passwords, checkers and the portal share, and the brokers the
integration tests start with ``--auth passwd:`` (:func:`secured_broker`, and
:func:`secured_module`, the ``secured`` fixture a test module shares): cheap scrypt
parameters, password files written with them, a checker that hashes synchronously,
and trial's Deferred assertions as plain functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.trial.unittest import SynchronousTestCase

from stompbroker.security.checkers import PasswordFileChecker
from stompbroker.security.passwords import PasswordEntry, ScryptParams
from tests.support.process import LOOPBACK_HTTP, BrokerProcess

#: Cheap parameters: the tests are about behaviour, not cost.
FAST = ScryptParams(n=16, r=1, p=1)

_trial = SynchronousTestCase()
success_result_of = _trial.successResultOf
failure_result_of = _trial.failureResultOf
assert_no_result = _trial.assertNoResult


def write_users(path: Path, *entries: tuple[str, str, tuple[str, ...]]) -> Path:
    """Write a password file of ``(user, password, groups)`` with cheap hashes."""
    lines = [
        PasswordEntry.create(user, password, groups, FAST).format()
        for user, password, groups in entries
    ]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def checker_for(path: Path, calls: list[str] | None = None) -> PasswordFileChecker:
    """A checker that hashes synchronously, recording the user of each hash it runs."""

    def run_blocking(function: Callable[..., Any], *args: Any) -> Deferred[Any]:
        if calls is not None:
            calls.append(function.__self__.user)
        return maybeDeferred(function, *args)

    return PasswordFileChecker(str(path), run_blocking=run_blocking)


def secured_broker(
    workdir: Path, access: str, *users: tuple[str, str, tuple[str, ...]], web: bool = False
) -> BrokerProcess:
    """
    :param access: the access rules' TOML.
    :param users: ``(user, password, groups)`` for the password file.
    :param web: whether it has a web port (the management API, WebSocket).
    :returns: a broker, without a store, that logs ``users`` in with ``--auth
        passwd:`` and applies ``access`` (a context manager that stops it).
    """
    password_file = write_users(workdir / "users.txt", *users)
    (workdir / "access.toml").write_text(access)
    return BrokerProcess(
        workdir,
        "--auth",
        f"passwd:{password_file}",
        "--access",
        str(workdir / "access.toml"),
        "--data-dir",
        "none",
        http=LOOPBACK_HTTP if web else None,
    )


def secured_module(access: str, *users: tuple[str, str, tuple[str, ...]]) -> Any:
    """
    :param access: the access rules' TOML.
    :param users: ``(user, password, groups)`` for the password file.
    :returns: a fixture ``secured``: one :func:`secured_broker` of ``users`` and
        ``access``, shared by the tests of a module and stopped after the last.
    """

    @pytest.fixture(scope="module", name="secured")
    def shared_secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
        with secured_broker(tmp_path_factory.mktemp("secured"), access, *users) as process:
            yield process

    return shared_secured_broker
