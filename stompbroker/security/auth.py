"""
Who a client is: CONNECT's ``login`` and ``passcode``, checked through ``twisted.cred``.

Theory of operation
-------------------
The broker authenticates with the checkers that ``--auth`` descriptions name,
exactly as other twistd plugins do (``twisted.cred.strcred``: ``memory:alice:secret``,
``unix``, ``file:users.txt``, and our ``passwd:users.txt``).  :func:`make_portal`
puts them behind one :class:`~twisted.cred.portal.Portal` whose realm hands out
:class:`Identity` avatars; :func:`authenticate` is all a session calls.

A ``Portal`` keeps one checker per credentials interface, so several ``--auth``
options would silently replace one another; :func:`make_portal` chains them
instead, and the first that accepts the login wins.  An identity's groups come
only from the checker that accepted its password, so a user who logs in through
``unix`` does not pick up the groups a password file gives a namesake.

Without any checker there is no authentication: every client is anonymous,
whatever ``login`` it sends, as before ``--auth`` existed.  With checkers,
anonymous access (a CONNECT without ``login``) is refused unless allowed.

Password file
-------------
The ``passwd`` checker reads a text file with one user per line::

    # comments and blank lines are ignored
    alice:scrypt$16384$8$1$<salt>$<hash>:traders,ops
    bob:scrypt$16384$8$1$<salt>$<hash>:

The fields are the user name (no ``:``, no line break), the password hash, and the
user's groups, comma-separated, possibly none.  The hash is ``scrypt`` with its
cost parameters ``N``, ``r`` and ``p`` recorded in each entry, so that raising
:data:`DEFAULT_SCRYPT` later leaves old entries valid; salt and hash are standard
base64.  Checking a password takes tens of milliseconds on purpose, so it runs
in a thread, off the reactor (``hashlib.scrypt`` releases the GIL); an unknown
user costs the same time as a known one, so timing does not tell which names
exist.  The checker re-reads the file whenever it changes on disk, so users added
with ``stompbroker passwd`` can log in at once; a file that became unreadable or
invalid is logged and the last good version stays in use.

Credentials never reach the logs: a checker that fails unexpectedly is logged by
the type of its error only, since an error's text may quote its input.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any

from attrs import field, frozen
from twisted.cred.checkers import (
    ANONYMOUS,
    AllowAnonymousAccess,
    FilePasswordDB,
    ICredentialsChecker,
)
from twisted.cred.credentials import (
    IAnonymous,
    IUsernamePassword,
    UsernamePassword,
)
from twisted.cred.error import UnauthorizedLogin, UnhandledCredentials
from twisted.cred.portal import IRealm, Portal
from twisted.internet.defer import CancelledError, Deferred, fail, maybeDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater
from twisted.python.failure import Failure
from zope.interface import Attribute, Interface, implementer

from stompbroker.logs import logger
from stompbroker.protocol.credentials import LoginRefused
from stompbroker.protocol.errors import LoginFailed
from stompbroker.security.credentials import (
    IBearerToken,
    ICertificate,
    InvalidCredentials,
    connect_credentials,
)

__all__ = [
    "ANONYMOUS_IDENTITY",
    "Authenticator",
    "DEFAULT_SCRYPT",
    "FAILED_LOGIN_DELAY",
    "IGroupSource",
    "IIdentity",
    "Identity",
    "PasswordEntry",
    "PasswordFileChecker",
    "PasswordFileError",
    "ScryptParams",
    "StompRealm",
    "authenticate",
    "check_names",
    "delete_user",
    "make_portal",
    "read_password_file",
    "set_password",
]

log = logger("stompbroker.security.auth")

#: Seconds between a refused login and its answer, to slow down guessing.
FAILED_LOGIN_DELAY = 1.0

#: The most memory one password check may take; larger parameters are refused.
MAX_SCRYPT_MEMORY = 256 * 1024 * 1024

_SALT_BYTES = 16
_HASH_BYTES = 32
_SCHEME = "scrypt"
#: Characters a user name cannot hold, because of the file format.
_USER_FORBIDDEN = ":\n\r"
#: Characters a group name cannot hold: the separators, and white space.
_GROUP_FORBIDDEN = frozenset(":,\n\r\t ")


# -- identities --------------------------------------------------------------------


class IIdentity(Interface):
    """The avatar the broker's realm gives an authenticated (or anonymous) client."""

    name = Attribute("The user name; ``anonymous`` for an anonymous client.")
    groups = Attribute("A frozenset of the groups the user belongs to.")
    anonymous = Attribute("``True`` for a client that did not log in.")


@implementer(IIdentity)
@frozen
class Identity:
    """
    Who a connected client is, as the access policy sees it.

    :ivar name: the user name the checker accepted.
    :ivar groups: the groups the accepting checker gives the user.
    :ivar anonymous: ``True`` for a client that sent no ``login``; such an
        identity gets only the access file's ``[anonymous]`` rules, whatever its name.
    :ivar granted: the rights the identity carries itself (a token's scopes, a
        :class:`~stompbroker.security.access.Grants`), which the access rules
        consult instead of the access file; ``None`` for the others.
    :ivar expires: when the credentials stop being valid (a token's ``exp``,
        POSIX seconds); the session ends the connection then.  ``None``: never.
    """

    name: str
    groups: frozenset[str] = field(default=frozenset(), converter=frozenset)
    anonymous: bool = False
    granted: Any = field(default=None, repr=False)
    expires: float | None = None


#: The identity of every client that did not log in.
ANONYMOUS_IDENTITY = Identity("anonymous", anonymous=True)


# -- password entries --------------------------------------------------------------


@frozen
class ScryptParams:
    """
    The cost parameters of one scrypt hash (RFC 7914).

    :ivar n: the CPU and memory cost, a power of two.
    :ivar r: the block size.
    :ivar p: the parallelism.
    """

    n: int = 2**14
    r: int = 8
    p: int = 1

    def memory(self) -> int:
        """:returns: the bytes one hash needs, as OpenSSL counts them."""
        return 128 * self.r * (self.n + self.p + 2)

    def check(self) -> None:
        """
        :raises ValueError: if the parameters are not valid, or would need more
            than :data:`MAX_SCRYPT_MEMORY`.
        """
        if self.n < 2 or self.n & (self.n - 1):
            raise ValueError(f"scrypt N must be a power of two, at least 2, not {self.n}")
        if not (1 <= self.r <= 64 and 1 <= self.p <= 64):
            raise ValueError(f"scrypt r and p must be 1 to 64, not {self.r} and {self.p}")
        if self.memory() > MAX_SCRYPT_MEMORY:
            raise ValueError(
                f"scrypt N={self.n}, r={self.r} needs more than"
                f" {MAX_SCRYPT_MEMORY // (1024 * 1024)} MiB"
            )


#: The parameters new entries get: about 16 MiB and 50 ms per check.
DEFAULT_SCRYPT = ScryptParams()


def _scrypt(password: str, salt: bytes, params: ScryptParams, length: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"),
        salt=salt,
        n=params.n,
        r=params.r,
        p=params.p,
        maxmem=params.memory() + 1024 * 1024,
        dklen=length,
    )


def check_names(user: str, groups: Iterable[str] = ()) -> None:
    """
    :raises ValueError: if ``user`` or a group name cannot be written in a password file.
    """
    if not user or any(character in user for character in _USER_FORBIDDEN):
        raise ValueError("a user name must be non-empty and hold no ':' or line break")
    for group in groups:
        if not group or _GROUP_FORBIDDEN.intersection(group):
            raise ValueError(
                f"invalid group name {group!r}: it must be non-empty and hold no"
                " ':', ',' or white space"
            )


def _as_tuple(groups: Iterable[str]) -> tuple[str, ...]:
    return tuple(groups)


@frozen
class PasswordEntry:
    """
    One line of a password file.

    :ivar user: the user name.
    :ivar params: the scrypt parameters the hash was made with.
    :ivar salt: the random salt.
    :ivar digest: the scrypt hash of the password.
    :ivar groups: the user's groups, in file order.
    """

    user: str
    params: ScryptParams
    salt: bytes = field(repr=False)
    digest: bytes = field(repr=False)
    groups: tuple[str, ...] = field(default=(), converter=_as_tuple)

    @classmethod
    def create(
        cls,
        user: str,
        password: str,
        groups: Iterable[str] = (),
        params: ScryptParams = DEFAULT_SCRYPT,
    ) -> PasswordEntry:
        """
        Hash a password with a fresh salt.

        :raises ValueError: for a user or group name the file cannot hold, or bad
            parameters.
        """
        groups = tuple(groups)
        check_names(user, groups)
        params.check()
        salt = secrets.token_bytes(_SALT_BYTES)
        return cls(user, params, salt, _scrypt(password, salt, params, _HASH_BYTES), groups)

    def verify(self, password: str) -> bool:
        """
        Check a password in constant time with respect to the stored hash.

        Slow on purpose: call it off the reactor thread.

        :returns: ``True`` if ``password`` is the one this entry was made from.
        """
        candidate = _scrypt(password, self.salt, self.params, len(self.digest))
        return hmac.compare_digest(candidate, self.digest)

    def format(self) -> str:
        """:returns: the entry as one password file line, without its line end."""
        params = self.params
        salt = base64.b64encode(self.salt).decode("ascii")
        digest = base64.b64encode(self.digest).decode("ascii")
        hashed = f"{_SCHEME}${params.n}${params.r}${params.p}${salt}${digest}"
        return f"{self.user}:{hashed}:{','.join(self.groups)}"

    @classmethod
    def parse(cls, line: str) -> PasswordEntry:
        """
        Read one entry; the error messages never quote the hash.

        :param line: a line without its line end, not blank and not a comment.
        :raises ValueError: if the line is not a valid entry.
        """
        fields = line.split(":")
        if len(fields) not in (2, 3):
            raise ValueError("expected user:hash:groups")
        user, hashed = fields[0], fields[1]
        groups = [group.strip() for group in fields[2].split(",")] if len(fields) == 3 else []
        groups = [group for group in groups if group]
        check_names(user, groups)
        parts = hashed.split("$")
        if len(parts) != 6 or parts[0] != _SCHEME:
            raise ValueError(f"the hash must be {_SCHEME}$N$r$p$salt$hash")
        try:
            params = ScryptParams(int(parts[1]), int(parts[2]), int(parts[3]))
        except ValueError:
            raise ValueError("scrypt N, r and p must be integers") from None
        params.check()
        try:
            salt = base64.b64decode(parts[4], validate=True)
            digest = base64.b64decode(parts[5], validate=True)
        except binascii.Error:
            raise ValueError("the salt and hash must be base64") from None
        if len(salt) < 8 or len(digest) < 16:
            raise ValueError("the salt must have 8 bytes or more, the hash 16 or more")
        return cls(user, params, salt, digest, groups)


class PasswordFileError(Exception):
    """
    A password file cannot be read, or holds a line that is not a valid entry.

    :param path: the file.
    :param line: the 1-based line number, or ``None`` for the file as a whole.
    :param reason: what is wrong, without quoting any hash.
    """

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def _parse_lines(path: str, lines: Iterable[str]) -> Iterable[tuple[str, PasswordEntry | None]]:
    """
    :returns: each line with its entry, or ``None`` for a blank line or comment.
    :raises PasswordFileError: at the first invalid line, or a repeated user.
    """
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        text = line.rstrip("\r\n")
        if not text.strip() or text.lstrip().startswith("#"):
            yield line, None
            continue
        try:
            entry = PasswordEntry.parse(text)
        except ValueError as error:
            raise PasswordFileError(path, number, str(error)) from None
        if entry.user in seen:
            raise PasswordFileError(path, number, f"user {entry.user!r} appears twice")
        seen.add(entry.user)
        yield line, entry


def _read_lines(path: str) -> list[str]:
    """:raises PasswordFileError: if the file cannot be read as UTF-8 text."""
    try:
        with open(path, encoding="utf-8", newline="") as file:
            return file.read().splitlines(keepends=True)
    except OSError as error:
        raise PasswordFileError(path, None, f"cannot read it: {error.strerror}") from None
    except UnicodeDecodeError:
        raise PasswordFileError(path, None, "it is not UTF-8 text") from None


def read_password_file(path: str) -> dict[str, PasswordEntry]:
    """
    :returns: the file's entries by user name.
    :raises PasswordFileError: if the file cannot be read or has an invalid line.
    """
    return {
        entry.user: entry for _, entry in _parse_lines(path, _read_lines(path)) if entry is not None
    }


def _write_atomically(path: str, text: str) -> None:
    """
    Replace a file's content in one step, so that the broker never reads half of it.

    A new file is readable by its owner only; an existing one keeps its mode.
    """
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o600
    descriptor, temporary = tempfile.mkstemp(
        prefix=".stompbroker-passwd-", dir=os.path.dirname(os.path.abspath(path))
    )
    replaced = False
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
        replaced = True
    finally:
        if not replaced:
            with suppress(FileNotFoundError):
                os.unlink(temporary)


def _rewrite(path: str, user: str, replacement: PasswordEntry | None) -> PasswordEntry | None:
    """
    Write the file back with ``user``'s line replaced (or appended), or removed
    when ``replacement`` is ``None``; every other line is kept as it was.

    :returns: the user's previous entry, if there was one.  The file is not
        touched when a user who is not there is to be removed.
    """
    creating = replacement is not None and not os.path.exists(path)
    lines = [] if creating else _read_lines(path)
    previous = None
    kept = []
    for line, entry in _parse_lines(path, lines):
        if entry is not None and entry.user == user:
            previous = entry
            if replacement is not None:
                kept.append(replacement.format() + "\n")
            continue
        kept.append(line if line.endswith("\n") else line + "\n")
    if previous is None:
        if replacement is None:
            return None
        kept.append(replacement.format() + "\n")
    _write_atomically(path, "".join(kept))
    return previous


def set_password(
    path: str,
    user: str,
    password: str,
    groups: Sequence[str] | None = None,
    params: ScryptParams = DEFAULT_SCRYPT,
) -> PasswordEntry:
    """
    Add a user to a password file (creating it), or give an existing user a new password.

    :param groups: the user's groups; ``None`` keeps an existing user's groups
        (and gives a new user none).
    :returns: the entry written.
    :raises PasswordFileError: if the existing file is unreadable or invalid.
    :raises ValueError: for a user or group name the file cannot hold.
    """
    if groups is None:
        existing = read_password_file(path).get(user) if os.path.exists(path) else None
        groups = existing.groups if existing is not None else ()
    entry = PasswordEntry.create(user, password, groups, params)
    _rewrite(path, user, entry)
    return entry


def delete_user(path: str, user: str) -> bool:
    """
    Remove a user from a password file.

    :returns: ``True`` if the user was there.
    :raises PasswordFileError: if the file is unreadable or invalid.
    """
    return _rewrite(path, user, None) is not None


# -- checking passwords ------------------------------------------------------------


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
    Checks user names and passwords against a password file (see the module docstring).

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
        self._signature = self._stat()
        self._entries = read_password_file(path)
        # Checked in place of an unknown user's entry, so that it costs the same.
        self._decoy = PasswordEntry(
            "", DEFAULT_SCRYPT, secrets.token_bytes(_SALT_BYTES), secrets.token_bytes(_HASH_BYTES)
        )

    def _stat(self) -> tuple[int, int, int] | None:
        """:returns: what tells that the file changed, or ``None`` if it cannot be read."""
        try:
            status = os.stat(self.path)
        except OSError:
            return None
        return (status.st_ino, status.st_mtime_ns, status.st_size)

    def _refresh(self) -> None:
        """Re-read the file if it changed since it was last read; keep the old entries on error."""
        signature = self._stat()
        if signature == self._signature:
            return
        self._signature = signature
        if signature is None:
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

    def requestAvatarId(self, credentials: IUsernamePassword) -> Deferred[str]:
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


# -- the portal --------------------------------------------------------------------


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


def _avatar_name(avatar_id: str | bytes) -> str:
    if isinstance(avatar_id, bytes):
        return avatar_id.decode("utf-8", errors="replace")
    return avatar_id


@implementer(ICredentialsChecker)
class _FirstAccepting:
    """
    Tries password checkers in order; the first that accepts makes the identity.

    Its avatar ids are :class:`Identity` objects, which only :class:`StompRealm`
    understands; it is private to :func:`make_portal`.
    """

    credentialInterfaces = (IUsernamePassword,)

    def __init__(self, checkers: Sequence[ICredentialsChecker]) -> None:
        self._checkers: tuple[Any, ...] = tuple(checkers)

    def requestAvatarId(self, credentials: IUsernamePassword) -> Deferred[Identity]:
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
            name = _avatar_name(avatar_id)
            groups = checker.groups_of(name) if IGroupSource.providedBy(checker) else ()
            return Identity(name, groups)
        raise refusal or UnauthorizedLogin()


@implementer(IRealm)
class StompRealm:
    """Turns avatar ids into :class:`Identity` avatars."""

    def requestAvatar(
        self, avatarId: Any, mind: object, *interfaces: type[Interface]
    ) -> tuple[type[Interface], Identity, Callable[[], None]]:
        """
        :param avatarId: :data:`~twisted.cred.checkers.ANONYMOUS`, an
            :class:`Identity`, or a user name from a checker used directly.
        :returns: ``(IIdentity, identity, logout)``.
        :raises NotImplementedError: if :class:`IIdentity` is not asked for.
        """
        if IIdentity not in interfaces:
            raise NotImplementedError("the STOMP realm only provides IIdentity")
        if avatarId == ANONYMOUS:
            identity = ANONYMOUS_IDENTITY
        elif isinstance(avatarId, Identity):
            identity = avatarId
        else:
            identity = Identity(_avatar_name(avatarId))
        return IIdentity, identity, _logout


def _logout() -> None:
    """Identities hold no resources; logging out has nothing to release."""


def make_portal(checkers: Sequence[ICredentialsChecker], allow_anonymous: bool = False) -> Portal:
    """
    Build the portal a session logs clients in through.

    :param checkers: credentials checkers, usually ``--auth``'s (strcred's
        ``credCheckers``), tried in this order.  Each must check
        ``IUsernamePassword``, ``IAnonymous`` (``--auth anonymous``, which
        allows anonymous access like ``allow_anonymous``), or the bearer tokens
        and client certificates of :mod:`stompbroker.security.credentials`.
    :param allow_anonymous: let a client that sends no ``login`` in, as
        :data:`ANONYMOUS_IDENTITY`.
    :returns: the portal.  With no password or certificate checker at all there
        is no authentication: every client is anonymous, whatever it sends.
    :raises ValueError: for a checker that checks no kind of credentials a client
        can present.
    """
    password_checkers = []
    # Bearer tokens and client certificates, each with its own chain of checkers.
    other_checkers: dict[Any, list[ICredentialsChecker]] = {IBearerToken: [], ICertificate: []}
    for checker in checkers:
        interfaces = checker.credentialInterfaces
        for interface, chain in other_checkers.items():
            if interface in interfaces:
                chain.append(checker)
        if IUsernamePassword in interfaces:
            password_checkers.append(checker)
        elif IAnonymous in interfaces:
            allow_anonymous = True
        elif ICertificate not in interfaces:
            raise ValueError(
                f"{type(checker).__name__} checks neither user names and passwords"
                " nor anonymous access, which is all STOMP's CONNECT carries"
            )
    portal = Portal(StompRealm())
    for interface, chain in other_checkers.items():
        if chain:
            portal.registerChecker(_FirstAccepting(chain), interface)
    if not password_checkers and not other_checkers[ICertificate]:
        portal.registerChecker(AllowAnonymousAccess(), IAnonymous, IUsernamePassword)
        return portal
    if password_checkers:
        portal.registerChecker(_FirstAccepting(password_checkers), IUsernamePassword)
    if allow_anonymous:
        portal.registerChecker(AllowAnonymousAccess(), IAnonymous)
    return portal


def authenticate(
    portal: Portal,
    login: str | None,
    passcode: str | None,
    *,
    clock: IReactorTime,
    failure_delay: float = FAILED_LOGIN_DELAY,
    certificate: Any = None,
) -> Deferred[Identity]:
    """
    Log a client in with CONNECT's ``login`` and ``passcode`` headers.

    :param portal: from :func:`make_portal`.
    :param login: the ``login`` header; ``None`` or empty means anonymous,
        unless ``passcode`` holds a bearer token or ``certificate`` is given
        (:func:`~stompbroker.security.credentials.connect_credentials`).
    :param passcode: the ``passcode`` header; ``None`` counts as empty.
    :param clock: schedules the answer to a refused login.
    :param failure_delay: seconds between a refusal and its answer.
    :param certificate: the client's verified TLS certificate, for ``--auth cert``.
    :returns: a Deferred that fires with the client's :class:`Identity`, or fails
        with :class:`~stompbroker.protocol.errors.LoginFailed` after
        ``failure_delay`` (a :class:`~stompbroker.protocol.credentials.LoginRefused`
        naming the reason when a token or certificate checker gave one).
        Cancelling it (the client went away) fails it with ``CancelledError`` at once.
    """
    credentials = connect_credentials(portal.checkers, login, passcode, certificate)
    return (
        portal.login(credentials, None, IIdentity)
        .addCallback(_identity_of)
        .addErrback(_refused, clock, failure_delay)
    )


@frozen
class Authenticator:
    """
    What a session calls with CONNECT's ``login`` and ``passcode``: :func:`authenticate`
    through one portal, with the outcome logged.

    The session module imports no Twisted, so it is handed this callable (as
    ``SessionConfig.authenticator``) rather than the portal.  Each outcome is
    logged with the client's address and the user name it gave, never the passcode.

    :ivar portal: from :func:`make_portal`.
    :ivar clock: schedules the answer to a refused login.
    :ivar failure_delay: seconds between a refusal and its answer.
    """

    portal: Portal
    clock: IReactorTime
    failure_delay: float = FAILED_LOGIN_DELAY

    def __call__(
        self, login: str | None, passcode: str | None, peer: str, certificate: Any = None
    ) -> Deferred[Identity]:
        """
        :param login: the CONNECT ``login`` header.
        :param passcode: the CONNECT ``passcode`` header.
        :param peer: the client's address, for the log.
        :param certificate: the client's verified TLS certificate, if it has one.
        :returns: as :func:`authenticate`.
        """
        return authenticate(
            self.portal,
            login,
            passcode,
            clock=self.clock,
            failure_delay=self.failure_delay,
            certificate=certificate,
        ).addCallbacks(_logged_in, _login_refused, callbackArgs=(peer,), errbackArgs=(login, peer))


def _logged_in(identity: Identity, peer: str) -> Identity:
    if identity.anonymous:
        log.debug("anonymous login from {peer}", peer=peer)
    else:
        log.info("login of {user} from {peer}", user=identity.name, peer=peer)
    return identity


def _login_refused(failure: Failure, login: str | None, peer: str) -> Failure:
    if failure.check(LoginFailed):
        log.info(
            "login failed for {user} from {peer}{reason}",
            user=login if login else "(anonymous)",
            peer=peer,
            reason=f": {failure.value.reason}" if failure.check(LoginRefused) else "",
        )
    return failure


def _identity_of(result: tuple[Any, Any, Any]) -> Identity:
    identity: Identity = result[1]
    return identity


def _refused(failure: Failure, clock: IReactorTime, delay: float) -> Deferred[Identity]:
    if failure.check(CancelledError):
        return fail(failure)
    if not failure.check(UnauthorizedLogin, UnhandledCredentials):
        log.error("login failed with {error_type}", error_type=failure.type.__name__)
    refusal = failure.value if failure.check(InvalidCredentials) else None
    return deferLater(clock, delay, _raise_login_failed, refusal)


def _raise_login_failed(refusal: InvalidCredentials | None = None) -> Identity:
    if refusal is not None:
        raise LoginRefused(refusal.reason, refusal.detail)
    raise LoginFailed()
