"""
Password files: salted scrypt entries, and reading and rewriting the file they live in.

The ``passwd`` checker (:mod:`stompbroker.security.checkers`) reads these files and
``stompbroker passwd`` (:mod:`stompbroker.app.cli`) writes them; this module does
both jobs' file work and knows nothing of ``twisted.cred``.

The file holds one user per line::

    # comments and blank lines are ignored
    alice:scrypt$16384$8$1$<salt>$<hash>:traders,ops
    bob:scrypt$16384$8$1$<salt>$<hash>:

The fields are the user name (no ``:``, no line break), the password hash, and the
user's groups, comma-separated, possibly none.  The hash is ``scrypt`` with its
cost parameters ``N``, ``r`` and ``p`` recorded in each entry, so that raising
:data:`DEFAULT_SCRYPT` later leaves old entries valid; salt and hash are standard
base64.  Checking a password takes tens of milliseconds on purpose, which is why
the checker runs :meth:`PasswordEntry.verify` in a thread.  Writes replace the
file in one step, so that a broker re-reading it never sees half of it, and no
error message quotes a hash.
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
from collections.abc import Iterable, Sequence
from contextlib import suppress

from attrs import field, frozen

__all__ = [
    "DEFAULT_SCRYPT",
    "MAX_SCRYPT_MEMORY",
    "PasswordEntry",
    "PasswordFileError",
    "ScryptParams",
    "check_names",
    "delete_user",
    "read_password_file",
    "set_password",
]

#: The most memory one password check may take; larger parameters are refused.
MAX_SCRYPT_MEMORY = 256 * 1024 * 1024

_SALT_BYTES = 16
_HASH_BYTES = 32
_SCHEME = "scrypt"
#: Characters a user name cannot hold, because of the file format.
_USER_FORBIDDEN = ":\n\r"
#: Characters a group name cannot hold: the separators, and white space.
_GROUP_FORBIDDEN = frozenset(":,\n\r\t ")


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

    @classmethod
    def decoy(cls, params: ScryptParams = DEFAULT_SCRYPT) -> PasswordEntry:
        """
        An entry that no password matches, to check in place of an unknown user's,
        so that refusing an unknown name costs as long as refusing a known one.
        """
        return cls("", params, secrets.token_bytes(_SALT_BYTES), secrets.token_bytes(_HASH_BYTES))

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
