"""
Tests for :mod:`stompbroker.security.auth`: password entries and files, the ``passwd``
checker and its strcred plugin, the portal and :func:`authenticate`.

No sockets and no reactor: hashing runs synchronously through the checker's
``run_blocking`` hook, Deferreds are read with trial's ``successResultOf`` and
``failureResultOf``, and the delay after a refused login runs on a ``task.Clock``.
Most entries use tiny scrypt parameters, since the cost is what makes them slow.
"""

from __future__ import annotations

import io
import os
import pwd
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from twisted.cred import strcred
from twisted.cred.checkers import ICredentialsChecker, InMemoryUsernamePasswordDatabaseDontUse
from twisted.cred.credentials import IUsernamePassword, UsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import CancelledError, Deferred, fail, maybeDeferred
from twisted.internet.task import Clock
from twisted.logger import formatEvent
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import Interface, implementer

from stompbroker.protocol.errors import LoginFailed, ProtocolError
from stompbroker.security.auth import (
    ANONYMOUS_IDENTITY,
    DEFAULT_SCRYPT,
    FAILED_LOGIN_DELAY,
    Identity,
    IIdentity,
    PasswordEntry,
    PasswordFileChecker,
    PasswordFileError,
    ScryptParams,
    StompRealm,
    authenticate,
    make_portal,
    read_password_file,
    set_password,
)

#: Cheap parameters: the tests are about behaviour, not cost.
FAST = ScryptParams(n=16, r=1, p=1)

_trial = SynchronousTestCase()
success_result_of = _trial.successResultOf
failure_result_of = _trial.failureResultOf
assert_no_result = _trial.assertNoResult


def synchronously(function: Callable[..., Any], *args: Any) -> Deferred[Any]:
    """A ``run_blocking`` that hashes at once, in the test's thread."""
    return maybeDeferred(function, *args)


def write_users(path: Path, *entries: tuple[str, str, tuple[str, ...]]) -> Path:
    """Write a password file of ``(user, password, groups)`` with cheap hashes."""
    lines = [
        PasswordEntry.create(user, password, groups, FAST).format()
        for user, password, groups in entries
    ]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    return write_users(
        tmp_path / "users.txt", ("alice", "wonderland", ("traders", "ops")), ("bob", "builder", ())
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


# -- password entries --------------------------------------------------------------


def test_entry_verifies_its_password_and_no_other() -> None:
    """An entry accepts the password it was made from, and refuses a near miss."""
    entry = PasswordEntry.create("alice", "wonderland", params=FAST)
    assert entry.verify("wonderland")
    assert not entry.verify("Wonderland")
    assert not entry.verify("")


def test_entry_line_round_trips_with_its_parameters() -> None:
    """
    A formatted entry parses back equal, its scrypt parameters included, so old entries stay
    valid when the defaults rise.
    """
    entry = PasswordEntry.create("bob", "pässwörd", ["a", "b"], ScryptParams(n=32, r=2, p=3))
    line = entry.format()
    assert line.startswith("bob:scrypt$32$2$3$") and line.endswith(":a,b")
    parsed = PasswordEntry.parse(line)
    assert parsed == entry
    assert parsed.verify("pässwörd")


def test_salt_makes_equal_passwords_hash_differently() -> None:
    """Two entries for the same password differ, so a file does not show who shares one."""
    first = PasswordEntry.create("a", "same", params=FAST)
    second = PasswordEntry.create("b", "same", params=FAST)
    assert first.salt != second.salt and first.digest != second.digest


def test_default_parameters_are_the_documented_ones() -> None:
    """New entries default to scrypt N=2**14, r=8, p=1, about 16 MiB a check (docs/security.md)."""
    assert DEFAULT_SCRYPT == ScryptParams(16384, 8, 1)
    assert DEFAULT_SCRYPT.memory() < 17 * 1024 * 1024


GOOD_HASH = PasswordEntry.create("x", "pw", params=FAST).format().split(":")[1]
SALT_AND_HASH = "$".join(GOOD_HASH.split("$")[4:])


@pytest.mark.parametrize(
    "line, reason",
    [
        pytest.param("alice", "expected user:hash:groups", id="one-field"),
        pytest.param(f"alice:{GOOD_HASH}:a:b", "expected user:hash:groups", id="four-fields"),
        pytest.param(f":{GOOD_HASH}:", "user name must be non-empty", id="empty-user"),
        pytest.param(f"alice:bcrypt$16$1$1${SALT_AND_HASH}:", "must be scrypt", id="other-scheme"),
        pytest.param(f"alice:scrypt$16$1${SALT_AND_HASH}:", "must be scrypt", id="missing-param"),
        pytest.param(f"alice:scrypt$x$1$1${SALT_AND_HASH}:", "must be integers", id="bad-integer"),
        pytest.param(f"alice:scrypt$24$1$1${SALT_AND_HASH}:", "power of two", id="n-not-power"),
        pytest.param(f"alice:scrypt$16$0$1${SALT_AND_HASH}:", "r and p must be", id="zero-r"),
        pytest.param(
            f"alice:scrypt$1048576$8$1${SALT_AND_HASH}:", "needs more than", id="too-costly"
        ),
        pytest.param("alice:scrypt$16$1$1$!!$AAAA:", "must be base64", id="bad-base64"),
        pytest.param(
            "alice:scrypt$16$1$1$AAAA$" + "A" * 44 + ":", "salt must have", id="short-salt"
        ),
        pytest.param(f"alice:{GOOD_HASH}:a b", "invalid group name", id="space-in-group"),
    ],
)
def test_invalid_entry_is_refused_by_line_without_quoting_the_hash(
    tmp_path: Path, line: str, reason: str
) -> None:
    """A bad line fails the whole file with its line number; the message never quotes the hash."""
    path = tmp_path / "users.txt"
    path.write_text(f"# users\n{line}\n", encoding="utf-8")
    with pytest.raises(PasswordFileError, match=reason) as caught:
        read_password_file(str(path))
    assert caught.value.line == 2
    assert str(caught.value).startswith(f"{path}:2: ")
    assert SALT_AND_HASH.split("$")[0] not in str(caught.value)


def test_repeated_user_is_refused(tmp_path: Path) -> None:
    """A user listed twice is an error rather than a guess at which line counts."""
    path = write_users(tmp_path / "users.txt", ("alice", "1", ()), ("alice", "2", ()))
    with pytest.raises(PasswordFileError, match="appears twice") as caught:
        read_password_file(str(path))
    assert caught.value.line == 2


def test_comments_blank_lines_and_crlf_are_accepted(tmp_path: Path) -> None:
    """Comments, blank lines, CRLF line ends and a missing groups field are all fine."""
    entry = PasswordEntry.create("alice", "pw", params=FAST)
    text = "# the users\r\n\r\n   \r\n" + entry.format().rsplit(":", 1)[0] + "\r\n"
    path = tmp_path / "users.txt"
    path.write_bytes(text.encode())
    assert read_password_file(str(path)) == {"alice": entry}


def test_missing_or_undecodable_file_is_a_password_file_error(tmp_path: Path) -> None:
    """A file that cannot be read as UTF-8 text gives a PasswordFileError that names it."""
    with pytest.raises(PasswordFileError, match="cannot read it") as caught:
        read_password_file(str(tmp_path / "missing.txt"))
    assert caught.value.line is None
    (tmp_path / "latin1.txt").write_bytes(b"j\xf6rg:x:\n")
    with pytest.raises(PasswordFileError, match="not UTF-8"):
        read_password_file(str(tmp_path / "latin1.txt"))


# -- the passwd checker ------------------------------------------------------------


def checker_for(path: Path, calls: list[str] | None = None) -> PasswordFileChecker:
    """A checker that hashes synchronously, recording the user of each hash it runs."""

    def run_blocking(function: Callable[..., Any], *args: Any) -> Deferred[Any]:
        if calls is not None:
            calls.append(function.__self__.user)
        return maybeDeferred(function, *args)

    return PasswordFileChecker(str(path), run_blocking=run_blocking)


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
