"""
Tests for :mod:`stompbroker.security.checkers`: the ``passwd`` checker and its
strcred plugin.

No sockets and no reactor: hashing runs synchronously through the checker's
``run_blocking`` hook, and Deferreds are read with trial's ``successResultOf``
and ``failureResultOf``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from twisted.cred import strcred
from twisted.cred.credentials import IUsernamePassword, UsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.logger import formatEvent
from twisted.python import usage

from stompbroker.security.checkers import PasswordFileChecker
from stompbroker.security.passwords import set_password
from tests.support.passwords import FAST, checker_for, failure_result_of, success_result_of


def test_checker_accepts_the_right_password(users_file: Path) -> None:
    """The right password yields the user name as avatar id, as Twisted's own checkers do."""
    checker = checker_for(users_file)
    assert (
        success_result_of(checker.requestAvatarId(UsernamePassword("alice", "wonderland")))
        == "alice"
    )
    assert success_result_of(checker.requestAvatarId(UsernamePassword(b"bob", b"builder"))) == "bob"


def test_checker_refuses_a_wrong_password(users_file: Path) -> None:
    """A wrong password fails with UnauthorizedLogin."""
    checker = checker_for(users_file)
    failure_result_of(
        checker.requestAvatarId(UsernamePassword("alice", "builder")), UnauthorizedLogin
    )
    failure_result_of(
        checker.requestAvatarId(UsernamePassword(b"alice", b"\xff")), UnauthorizedLogin
    )


def test_unknown_user_costs_a_hash_too(users_file: Path) -> None:
    """An unknown user is refused only after a hash of the same cost, so timing tells no names."""
    calls: list[str] = []
    checker = checker_for(users_file, calls)
    failure_result_of(checker.requestAvatarId(UsernamePassword("mallory", "x")), UnauthorizedLogin)
    failure_result_of(checker.requestAvatarId(UsernamePassword("alice", "x")), UnauthorizedLogin)
    assert calls == ["", "alice"]


def test_checker_knows_the_groups_of_its_users(users_file: Path) -> None:
    """The checker reports each user's groups from the file, and none for strangers."""
    checker = checker_for(users_file)
    assert checker.groups_of("alice") == {"traders", "ops"}
    assert checker.groups_of("bob") == frozenset()
    assert checker.groups_of("mallory") == frozenset()


def test_checker_rereads_a_changed_file(users_file: Path, log_events: list[dict[str, Any]]) -> None:
    """A user added to the file while the broker runs can log in at the next attempt."""
    checker = checker_for(users_file)
    set_password(str(users_file), "carol", "singer", ["ops"], FAST)
    assert (
        success_result_of(checker.requestAvatarId(UsernamePassword("carol", "singer"))) == "carol"
    )
    assert checker.groups_of("carol") == {"ops"}
    assert any("reloaded" in formatEvent(event) for event in log_events)


def test_checker_keeps_its_last_good_file(
    users_file: Path, log_events: list[dict[str, Any]]
) -> None:
    """A file that turns invalid or disappears is logged, and the last good version stays in use."""
    checker = checker_for(users_file)
    users_file.write_text("garbage\n", encoding="utf-8")
    assert success_result_of(checker.requestAvatarId(UsernamePassword("bob", "builder"))) == "bob"
    users_file.unlink()
    assert success_result_of(checker.requestAvatarId(UsernamePassword("bob", "builder"))) == "bob"
    errors = [formatEvent(event) for event in log_events if event["log_level"].name == "error"]
    assert len(errors) == 2
    assert "users.txt:1: expected user:hash:groups" in errors[0]
    assert "cannot be read" in errors[1]


# -- strcred -----------------------------------------------------------------------


class AuthOptions(strcred.AuthOptionMixin, usage.Options):
    """Options with ``--auth``, as twistd plugins declare them."""

    supportedInterfaces = (IUsernamePassword,)


def test_strcred_makes_a_passwd_checker(users_file: Path) -> None:
    """``passwd:FILE`` is a strcred description, like ``memory:...`` and ``unix``."""
    checker = strcred.makeChecker(f"passwd:{users_file}")
    assert isinstance(checker, PasswordFileChecker)
    assert checker.path == str(users_file)


def test_auth_option_takes_passwd_memory_and_unix(users_file: Path) -> None:
    """``--auth`` accepts our checker next to Twisted's, in the order given."""
    options = AuthOptions()
    options.parseOptions(
        ["--auth", f"passwd:{users_file}", "--auth", "memory:alice:secret", "--auth", "unix"]
    )
    kinds = [type(checker).__name__ for checker in options["credCheckers"]]
    assert kinds == [
        "PasswordFileChecker",
        "InMemoryUsernamePasswordDatabaseDontUse",
        "UNIXChecker",
    ]


@pytest.mark.parametrize(
    "description, message",
    [
        pytest.param("passwd:", "passwd needs a file", id="no-file"),
        pytest.param("passwd:/nonexistent/users.txt", "cannot read it", id="missing-file"),
    ],
)
def test_auth_option_reports_a_bad_password_file(description: str, message: str) -> None:
    """A missing or unreadable password file stops option parsing with a readable error."""
    with pytest.raises(usage.UsageError, match=message):
        AuthOptions().parseOptions(["--auth", description])


def test_help_auth_lists_passwd() -> None:
    """``--help-auth`` lists the passwd type, and ``--help-auth-type passwd`` explains the file."""
    options = AuthOptions()
    options.authOutput = io.StringIO()
    with pytest.raises(SystemExit):
        options.parseOptions(["--help-auth"])
    assert "passwd" in options.authOutput.getvalue()
    options.authOutput = io.StringIO()
    with pytest.raises(SystemExit):
        options.parseOptions(["--help-auth-type", "passwd"])
    assert "user:scrypt$N$r$p$salt$hash:group1,group2" in options.authOutput.getvalue()
