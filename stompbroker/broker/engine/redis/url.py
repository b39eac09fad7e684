"""
The ``--engine`` value: ``memory``, or the URL of the Redis server the nodes share.

Accepted forms (those of redis-py's ``from_url``, less the Unix socket ones)::

    redis://HOST[:PORT][/DB]
    rediss://HOST[:PORT][/DB]                      TLS
    redis://:PASSWORD@HOST/DB  redis://USER:PASSWORD@HOST/DB
    redis://HOST/DB?password_file=/run/secrets/redis   the password read from a file

A password is never shown: :attr:`EngineURL.masked` is what logs and errors print.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit, urlunsplit

from attrs import field, frozen

__all__ = ["EngineURL", "EngineURLError", "MEMORY", "parse_engine"]

#: The in-process engine's name on the command line.
MEMORY = "memory"
DEFAULT_PORT = 6379
SCHEMES = ("redis", "rediss")


class EngineURLError(ValueError):
    """An ``--engine`` value that names no engine we can use; the message says why."""


@frozen
class EngineURL:
    """
    Where the Redis engine connects, and as whom.

    :ivar tls: ``rediss://``.
    :ivar host: the server's host name or address.
    :ivar port: its port.
    :ivar db: the database number.
    :ivar username: the ACL user, or ``None`` for the default user.
    :ivar password: the password, or ``None``; never printed (``repr`` hides it).
    :ivar prefix: the first part of every key and channel, so that several
        brokers may share one server (``?prefix=NAME``; ``stompbroker`` by default).
    """

    tls: bool
    host: str
    port: int
    db: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    prefix: str = "stompbroker"

    @property
    def masked(self) -> str:
        """:returns: the URL to show in logs and errors: the password, if any, as ``***``."""
        scheme = "rediss" if self.tls else "redis"
        user = quote(self.username or "", safe="")
        credentials = ""
        if self.password is not None:
            credentials = f"{user}:***@"
        elif self.username:
            credentials = f"{user}@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{credentials}{host}:{self.port}/{self.db}"

    def __str__(self) -> str:
        return self.masked


def parse_engine(text: str, password_file: str | None = None) -> EngineURL | None:
    """
    Read an ``--engine`` value.

    :param text: ``memory`` or a ``redis://``/``rediss://`` URL.
    :param password_file: a file whose first line is the password
        (``--engine-password-file``); it overrides one in the URL.
    :returns: ``None`` for the memory engine, else the :class:`EngineURL`.
    :raises EngineURLError: for anything else, or a password file that cannot be read.
    """
    if text == MEMORY:
        if password_file is not None:
            raise EngineURLError("--engine-password-file goes with a redis:// engine")
        return None
    try:
        parts = urlsplit(text)
        port = parts.port or DEFAULT_PORT
    except ValueError as error:
        raise EngineURLError(f"--engine: not a URL ({error})") from None
    if parts.scheme not in SCHEMES:
        raise EngineURLError(
            "--engine takes 'memory' or a redis:// or rediss:// URL, got"
            f" {_without_password(text)!r}"
        )
    if not parts.hostname:
        raise EngineURLError("--engine: the URL names no host (redis://HOST:PORT/DB)")
    path = parts.path.strip("/") or "0"
    if not path.isdigit():
        raise EngineURLError(f"--engine: the database must be a number, got {path!r}")
    query = parse_qs(parts.query)
    unknown = set(query) - {"password_file", "prefix"}
    if unknown:
        raise EngineURLError(f"--engine: unknown URL parameters {', '.join(sorted(unknown))}")
    password = unquote(parts.password) if parts.password is not None else None
    file_name = password_file or next(iter(query.get("password_file", ())), None)
    if file_name is not None:
        password = read_password(file_name)
    prefix = (query.get("prefix") or ["stompbroker"])[0]
    if not prefix or any(char in prefix for char in "*?[]{}: "):
        raise EngineURLError(f"--engine: the prefix must be a plain name, got {prefix!r}")
    return EngineURL(
        tls=parts.scheme == "rediss",
        host=parts.hostname,
        port=port,
        db=int(path),
        username=unquote(parts.username) if parts.username else None,
        password=password or None,
        prefix=prefix,
    )


def read_password(file_name: str) -> str:
    """
    :returns: the first line of a password file, without its line end.
    :raises EngineURLError: if it cannot be read.
    """
    try:
        text = Path(file_name).read_text(encoding="utf-8")
    except OSError as error:
        raise EngineURLError(
            f"--engine: cannot read the password file {file_name!r}: {error.strerror}"
        ) from None
    return text.splitlines()[0] if text else ""


def _without_password(text: str) -> str:
    """:returns: ``text`` with any password of a URL in it replaced by ``***``."""
    try:
        parts = urlsplit(text)
        if parts.password is None:
            return text
    except ValueError:
        return "<unreadable>"
    netloc = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{netloc}"))
