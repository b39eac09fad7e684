"""
Tests for :mod:`stompbroker.security.portal`: the portal over ``--auth``'s checkers,
the realm, and :func:`~stompbroker.security.portal.authenticate`.

No sockets and no reactor: hashing runs synchronously through the checker's
``run_blocking`` hook, and the delay after a refused login runs on a ``task.Clock``.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Any

import pytest
from twisted.cred import strcred
from twisted.cred.checkers import ICredentialsChecker, InMemoryUsernamePasswordDatabaseDontUse
from twisted.cred.credentials import IUsernamePassword
from twisted.internet.defer import CancelledError, Deferred, fail
from twisted.internet.task import Clock
from twisted.logger import formatEvent
from zope.interface import Interface, implementer

from stompbroker.protocol.errors import LoginFailed, ProtocolError
from stompbroker.security.identity import ANONYMOUS_IDENTITY, Identity, IIdentity
from stompbroker.security.portal import FAILED_LOGIN_DELAY, StompRealm, authenticate, make_portal
from tests.support.passwords import (
    assert_no_result,
    checker_for,
    failure_result_of,
    success_result_of,
)


def login(
    portal: Any, user: str | None, password: str | None, clock: Clock | None = None
) -> Deferred[Identity]:
    """Authenticate, advancing a fresh clock past the failure delay."""
    clock = clock if clock is not None else Clock()
    result = authenticate(portal, user, password, clock=clock)
    clock.advance(FAILED_LOGIN_DELAY)
    return result


def assert_refused(result: Deferred[Identity]) -> None:
    failure = failure_result_of(result, LoginFailed)
    assert failure.value.message == failure.value.detail == "login failed"


# -- portal and authenticate -------------------------------------------------------


def test_memory_checker_via_strcred() -> None:
    """``--auth memory:alice:secret`` lets alice in with her password only."""
    portal = make_portal([strcred.makeChecker("memory:alice:secret")])
    assert success_result_of(login(portal, "alice", "secret")) == Identity("alice")
    assert_refused(login(portal, "alice", "wrong"))
    assert_refused(login(portal, "bob", "secret"))


@pytest.mark.filterwarnings("ignore:'(crypt|spwd)' is deprecated:DeprecationWarning")
def test_unix_checker_via_strcred_refuses_wrong_passwords() -> None:
    """``--auth unix`` refuses a wrong password for a real account, and an unknown account."""
    portal = make_portal([strcred.makeChecker("unix")])
    me = pwd.getpwuid(os.getuid()).pw_name
    assert_refused(login(portal, me, "surely not the password \u2603"))
    assert_refused(login(portal, "no-such-user-here", "x"))


def test_file_checker_via_strcred_gets_bytes(tmp_path: Path) -> None:
    """Twisted's plain-text ``--auth file:`` checker, which compares bytes, works too."""
    path = tmp_path / "plain.txt"
    path.write_text("alice:secret\n", encoding="utf-8")
    portal = make_portal([strcred.makeChecker(f"file:{path}")])
    assert success_result_of(login(portal, "alice", "secret")) == Identity("alice")
    assert_refused(login(portal, "alice", "Secret"))


def passwd_portal(path: Path, *others: Any, allow_anonymous: bool = False) -> Any:
    return make_portal([checker_for(path), *others], allow_anonymous)


def test_passwd_login_carries_the_user_s_groups(users_file: Path) -> None:
    """A passwd login's identity holds the groups the file gives the user."""
    portal = passwd_portal(users_file)
    identity = success_result_of(login(portal, "alice", "wonderland"))
    assert identity == Identity("alice", {"traders", "ops"})
    assert IIdentity.providedBy(identity)
    assert_refused(login(portal, "alice", "builder"))
    assert_refused(login(portal, "mallory", "wonderland"))


def test_checkers_are_tried_in_order(users_file: Path) -> None:
    """With several ``--auth``, the first checker that accepts wins; a refusal tries the next."""
    memory = InMemoryUsernamePasswordDatabaseDontUse()
    memory.addUser("alice", "other")  # type: ignore[arg-type]
    portal = make_portal([memory, checker_for(users_file)])
    assert success_result_of(login(portal, "alice", "other")) == Identity("alice")
    assert success_result_of(login(portal, "alice", "wonderland")) == Identity(
        "alice", {"traders", "ops"}
    )


def test_groups_come_only_from_the_accepting_checker(users_file: Path) -> None:
    """A namesake accepted by another checker does not pick up the password file's groups."""
    memory = InMemoryUsernamePasswordDatabaseDontUse()
    memory.addUser("alice", "other")  # type: ignore[arg-type]
    portal = make_portal([checker_for(users_file), memory])
    assert success_result_of(login(portal, "alice", "other")).groups == frozenset()


@pytest.mark.parametrize("login_header", [None, ""])
def test_anonymous_is_refused_with_auth_unless_allowed(
    users_file: Path, login_header: str | None
) -> None:
    """With ``--auth``, a CONNECT without login fails, unless anonymous access is allowed."""
    assert_refused(login(passwd_portal(users_file), login_header, None))
    allowed = passwd_portal(users_file, allow_anonymous=True)
    assert success_result_of(login(allowed, login_header, None)) is ANONYMOUS_IDENTITY
    assert_refused(login(allowed, "alice", "wrong"))


def test_auth_anonymous_allows_anonymous_access(users_file: Path) -> None:
    """``--auth anonymous`` next to a password checker allows anonymous access like the flag."""
    portal = make_portal([checker_for(users_file), strcred.makeChecker("anonymous")])
    assert success_result_of(login(portal, None, None)) is ANONYMOUS_IDENTITY
    assert success_result_of(login(portal, "bob", "builder")) == Identity("bob")


def test_no_checkers_means_everyone_is_anonymous() -> None:
    """Without ``--auth`` every client is anonymous, whatever login it sends, as before."""
    portal = make_portal([])
    assert success_result_of(login(portal, None, None)) is ANONYMOUS_IDENTITY
    assert success_result_of(login(portal, "alice", "anything")) is ANONYMOUS_IDENTITY


def test_checker_for_other_credentials_is_refused() -> None:
    """A checker for neither passwords nor anonymity (e.g. SSH keys) is a configuration error."""

    class IOther(Interface):
        pass

    @implementer(ICredentialsChecker)
    class KeyChecker:
        credentialInterfaces = (IOther,)

    with pytest.raises(ValueError, match="KeyChecker checks neither"):
        make_portal([KeyChecker()])


def test_failed_login_is_answered_after_the_delay(users_file: Path) -> None:
    """A refusal comes only after the failure delay, to slow guessing; an acceptance at once."""
    clock = Clock()
    portal = passwd_portal(users_file)
    refused = authenticate(portal, "alice", "guess", clock=clock)
    assert_no_result(refused)
    clock.advance(FAILED_LOGIN_DELAY - 0.01)
    assert_no_result(refused)
    clock.advance(0.01)
    assert_refused(refused)
    accepted = authenticate(portal, "alice", "wonderland", clock=clock)
    assert success_result_of(accepted).name == "alice"
    assert clock.getDelayedCalls() == []


def test_cancelling_a_refusal_stops_its_timer(users_file: Path) -> None:
    """A client that leaves during the delay cancels the login, and no timer is left behind."""
    clock = Clock()
    refused = authenticate(passwd_portal(users_file), "alice", "guess", clock=clock)
    refused.cancel()
    failure_result_of(refused, CancelledError)
    assert clock.getDelayedCalls() == []


def test_login_failed_is_a_protocol_error() -> None:
    """LoginFailed is a client error whose ERROR says "login failed" and nothing more."""
    error = LoginFailed(receipt_id="7")
    assert isinstance(error, ProtocolError)
    assert (error.message, error.detail, error.receipt_id) == ("login failed", "login failed", "7")


@implementer(ICredentialsChecker)
class LeakyChecker:
    """A checker that breaks with an error quoting the password, as careless code might."""

    credentialInterfaces = (IUsernamePassword,)

    def requestAvatarId(self, credentials: Any) -> Deferred[str]:
        return fail(RuntimeError(f"cannot check {credentials.password}"))


def test_credentials_never_reach_the_logs(
    users_file: Path, log_events: list[dict[str, Any]]
) -> None:
    """Accepted, refused and broken logins log no passcode; a broken checker is logged by type."""
    portal = make_portal([LeakyChecker(), checker_for(users_file)])
    assert success_result_of(login(portal, "alice", "wonderland")).name == "alice"
    assert_refused(login(portal, "alice", "hunter2"))
    logged = " ".join(formatEvent(event) + repr(event) for event in log_events)
    assert "LeakyChecker failed with RuntimeError" in logged
    assert "wonderland" not in logged and "hunter2" not in logged


def test_realm_gives_only_identities() -> None:
    """The realm maps avatar ids to identities and refuses to make other avatars."""
    realm = StompRealm()
    assert realm.requestAvatar((), None, IIdentity)[1] is ANONYMOUS_IDENTITY
    assert realm.requestAvatar(b"alice", None, IIdentity)[1] == Identity("alice")
    with pytest.raises(NotImplementedError):
        realm.requestAvatar("alice", None, Interface)
