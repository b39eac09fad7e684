"""
The broker's ``twisted.cred`` checkers: the ``passwd`` file checker, and the chain that
tries several checkers in order.

:class:`PasswordFileChecker` checks CONNECT's ``login`` and ``passcode`` against a
password file (:mod:`stompbroker.security.passwords`); ``--auth passwd:FILE``
makes one through the strcred plugin in ``twisted/plugins/stompbroker_auth.py``.
Checking a password takes tens of milliseconds on purpose, so it runs in a
thread, off the reactor (``hashlib.scrypt`` releases the GIL); an unknown user
costs the same time as a known one, so timing does not tell which names exist.
The checker re-reads the file whenever it changes on disk, so users added with
``stompbroker passwd`` can log in at once; a file that became unreadable or
invalid is logged and the last good version stays in use.

A ``Portal`` keeps one checker per credentials interface, so several ``--auth``
options would silently replace one another; :class:`FirstAcceptingChecker` chains
them instead, and the first that accepts the login makes the
:class:`~stompbroker.security.identity.Identity`.  Its groups come only from the
checker that accepted the password, so a user who logs in through ``unix`` does
not pick up the groups a password file gives a namesake.

Credentials never reach the logs: a checker that fails unexpectedly is logged by
the type of its error only, since an error's text may quote its input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from twisted.cred.checkers import FilePasswordDB, ICredentialsChecker
from twisted.cred.credentials import IUsernamePassword, UsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import Deferred, fail, maybeDeferred
from zope.interface import Interface, implementer

from stompbroker.logs import logger
from stompbroker.security.credentials import InvalidCredentials
from stompbroker.security.file_watch import FileWatch
from stompbroker.security.identity import Identity, avatar_name
from stompbroker.security.passwords import PasswordEntry, PasswordFileError, read_password_file

__all__ = ["FirstAcceptingChecker", "IGroupSource", "PasswordFileChecker"]

log = logger("stompbroker.security.checkers")


class IGroupSource(Interface):
    """A checker that also knows which groups the users it accepts belong to."""

    def groups_of(name):  # type: ignore[no-untyped-def]
        """:returns: the groups of user ``name``, a frozenset (empty if unknown)."""


def _text(value: str | bytes) -> str:
    """:raises UnauthorizedLogin: for bytes that are not UTF-8, which no entry can match."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise UnauthorizedLogin() from None
    return value


def _in_thread(function: Callable[..., Any], *args: Any) -> Deferred[Any]:
    """Run in the global reactor's thread pool, imported late: strcred gives no reactor."""
    from twisted.internet.threads import deferToThread

    return deferToThread(function, *args)


@implementer(ICredentialsChecker, IGroupSource)
class PasswordFileChecker:
    """
    Checks user names and passwords against a password file (see the module docstring
    of :mod:`stompbroker.security.passwords`).

    :param path: the password file; it must exist and be valid now.
    :param run_blocking: calls a function with arguments and returns a Deferred
        of its result; password hashing goes through it.  By default the reactor's
        thread pool; tests pass a synchronous stand-in.
    :raises PasswordFileError: if the file cannot be read or is invalid.
    """

    credentialInterfaces = (IUsernamePassword,)

    def __init__(self, path: str, run_blocking: Callable[..., Deferred[Any]] = _in_thread) -> None:
        self.path = path
        self._run_blocking = run_blocking
        self._watch = FileWatch(path)
        self._entries = read_password_file(path)
        # Checked in place of an unknown user's entry, so that it costs the same.
        self._decoy = PasswordEntry.decoy()

    def _refresh(self) -> None:
        """Re-read the file if it changed since it was last read; keep the old entries on error."""
        watch = self._watch
        if not watch.changed():
            return
        if not watch.present:
            log.error(
                "password file {path} cannot be read; keeping its last version", path=self.path
            )
            return
        try:
            entries = read_password_file(self.path)
        except PasswordFileError as error:
            log.error(
                "password file not reloaded, keeping its last version: {reason}",
                reason=str(error),
            )
            return
        self._entries = entries
        log.info("password file {path} reloaded: {users} users", path=self.path, users=len(entries))

    # Twisted annotates avatar ids as bytes; ours are text, as strcred's memory
    # checker's are, and the realm takes both.
    def requestAvatarId(self, credentials: IUsernamePassword) -> Deferred[str]:  # type: ignore[override]
        """
        :returns: a Deferred that fires with the user name, or fails with
            :class:`~twisted.cred.error.UnauthorizedLogin`.
        """
        self._refresh()
        try:
            name = _text(credentials.username)
            password = _text(credentials.password)
        except UnauthorizedLogin:
            return fail(UnauthorizedLogin())
        entry = self._entries.get(name)
        accepted = name if entry is not None else None
        verifying = self._run_blocking((entry or self._decoy).verify, password)
        return verifying.addCallback(_accept, accepted)

    def groups_of(self, name: str) -> frozenset[str]:
        """:returns: the groups the file gives ``name``; empty for an unknown user."""
        entry = self._entries.get(name)
        return frozenset(entry.groups) if entry is not None else frozenset()


def _accept(matched: bool, name: str | None) -> str:
    if matched and name is not None:
        return name
    raise UnauthorizedLogin()


def _credentials_for(checker: ICredentialsChecker, credentials: Any) -> Any:
    """
    Twisted's checkers disagree on text: ``memory`` (from strcred) stores ``str``,
    ``file`` compares ``bytes``; give each what it compares.
    """
    if isinstance(checker, FilePasswordDB):
        return UsernamePassword(
            credentials.username.encode("utf-8"), credentials.password.encode("utf-8")
        )
    return credentials


@implementer(ICredentialsChecker)
class FirstAcceptingChecker:
    """
    Tries checkers of one kind of credentials in order; the first that accepts
    makes the identity.  A checker that makes a whole
    :class:`~stompbroker.security.identity.Identity` itself (a token's, with its
    rights and expiry) gives it as is; and the first reason a checker gave for a
    refusal (:class:`~stompbroker.security.credentials.InvalidCredentials`) is the
    one the client is told, whatever the checkers after it say.

    Its avatar ids are :class:`~stompbroker.security.identity.Identity` objects,
    which only :class:`~stompbroker.security.portal.StompRealm` understands:
    :func:`~stompbroker.security.portal.make_portal` is what puts it in a portal.

    :param checkers: credentials checkers of ``IUsernamePassword`` (or of the
        bearer tokens or client certificates of
        :mod:`stompbroker.security.credentials`), in order.
    """

    credentialInterfaces = (IUsernamePassword,)

    def __init__(self, checkers: Sequence[ICredentialsChecker]) -> None:
        self._checkers: tuple[Any, ...] = tuple(checkers)

    # Its avatar ids are identities, not the bytes Twisted's annotations expect:
    # only StompRealm, which make_portal pairs it with, receives them.
    def requestAvatarId(self, credentials: IUsernamePassword) -> Deferred[Identity]:  # type: ignore[override]
        """
        :returns: a Deferred that fires with the identity the first accepting checker
            makes, or fails with :class:`~twisted.cred.error.UnauthorizedLogin`.
        """
        return Deferred.fromCoroutine(self._first_accepting(credentials))

    async def _first_accepting(self, credentials: IUsernamePassword) -> Identity:
        # The first reason a checker gave the client survives the checkers after it.
        refusal: InvalidCredentials | None = None
        for checker in self._checkers:
            try:
                avatar_id = await maybeDeferred(
                    checker.requestAvatarId, _credentials_for(checker, credentials)
                )
            except InvalidCredentials as error:
                refusal = refusal or error
                continue
            except UnauthorizedLogin:
                continue
            except Exception as error:
                # A checker plug-in may fail in any way (the unix one cannot read
                # /etc/shadow without privileges): the client must just get "login
                # failed" and the next checker its chance.  Only the error's type is
                # logged, since its text may quote the credentials.
                log.error(
                    "credentials checker {checker} failed with {error_type}",
                    checker=type(checker).__name__,
                    error_type=type(error).__name__,
                )
                continue
            if isinstance(avatar_id, Identity):
                # A token checker makes the whole identity: rights and expiry.
                return avatar_id
            name = avatar_name(avatar_id)
            groups = checker.groups_of(name) if IGroupSource.providedBy(checker) else ()
            return Identity(name, groups)
        raise refusal or UnauthorizedLogin()
