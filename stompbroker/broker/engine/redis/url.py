"""
The ``--engine`` value: ``memory``, or the URL of the Redis server the nodes share.

Accepted forms (those of redis-py's ``from_url``, less the Unix socket ones)::

    redis://HOST[:PORT][/DB]
    rediss://HOST[:PORT][/DB]                      TLS
    redis://:PASSWORD@HOST/DB  redis://USER:PASSWORD@HOST/DB
    redis://HOST/DB?password_file=/run/secrets/redis   the password read from a file
    redis+sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]   the primary Sentinel names
    rediss+sentinel://...                          TLS to the Sentinels and the servers

With Sentinel, the hosts are the Sentinels' (port 26379 by default) and
``MASTER`` the name they monitor; a password in the URL is the servers', and
``?sentinel_password_file=PATH`` (or ``--engine-sentinel-password-file``) the
Sentinels' own, if they need one.

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
DEFAULT_SENTINEL_PORT = 26379
SCHEMES = ("redis", "rediss")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
PARAMETERS = {"password_file", "prefix", "sentinel_password_file"}


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
    :ivar sentinels: the Sentinels' (host, port), in the URL's order; empty
        without Sentinel (``host`` and ``port`` are then the server's; with
        Sentinel they are the first Sentinel's, for messages only).
    :ivar master: the name the Sentinels monitor the primary under.
    :ivar sentinel_password: the Sentinels' own password, or ``None``.
    """

    tls: bool
    host: str
    port: int
    db: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    prefix: str = "stompbroker"
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = ""
    sentinel_password: str | None = field(default=None, repr=False)

    @property
    def masked(self) -> str:
        """:returns: the URL to show in logs and errors: the password, if any, as ``***``."""
        scheme = "rediss" if self.tls else "redis"
        if self.sentinels:
            scheme += "+sentinel"
        user = quote(self.username or "", safe="")
        credentials = ""
        if self.password is not None:
            credentials = f"{user}:***@"
        elif self.username:
            credentials = f"{user}@"
        if self.sentinels:
            hosts = ",".join(_host_port(host, port) for host, port in self.sentinels)
            return f"{scheme}://{credentials}{hosts}/{self.master}/{self.db}"
        return f"{scheme}://{credentials}{_host_port(self.host, self.port)}/{self.db}"

    def __str__(self) -> str:
        return self.masked


def parse_engine(
    text: str, password_file: str | None = None, sentinel_password_file: str | None = None
) -> EngineURL | None:
    """
    Read an ``--engine`` value.

    :param text: ``memory`` or a ``redis://``/``rediss://`` (or ``+sentinel``) URL.
    :param password_file: a file whose first line is the password
        (``--engine-password-file``); it overrides one in the URL.
    :param sentinel_password_file: a file whose first line is the Sentinels'
        password (``--engine-sentinel-password-file``); it overrides the URL's
        ``?sentinel_password_file=``.
    :returns: ``None`` for the memory engine, else the :class:`EngineURL`.
    :raises EngineURLError: for anything else, or a password file that cannot be read.
    """
    if text == MEMORY:
        if password_file is not None or sentinel_password_file is not None:
            raise EngineURLError(
                "--engine-password-file and --engine-sentinel-password-file go with a"
                " redis:// engine"
            )
        return None
    try:
        parts = urlsplit(text)
    except ValueError as error:
        raise EngineURLError(f"--engine: not a URL ({error})") from None
    if parts.scheme not in SCHEMES + SENTINEL_SCHEMES:
        raise EngineURLError(
            "--engine takes 'memory' or a redis://, rediss://, redis+sentinel:// or"
            f" rediss+sentinel:// URL, got {_without_password(text)!r}"
        )
    sentinel = parts.scheme in SENTINEL_SCHEMES
    hosts = _hosts(parts.netloc.rpartition("@")[2], sentinel)
    path = parts.path.strip("/")
    master = ""
    if sentinel:
        master, _, path = path.partition("/")
        if not master:
            raise EngineURLError(
                "--engine: a Sentinel URL names the primary after the Sentinels"
                " (redis+sentinel://HOST:PORT,HOST:PORT/MASTER/DB)"
            )
    path = path or "0"
    if not path.isdigit():
        raise EngineURLError(f"--engine: the database must be a number, got {path!r}")
    query = parse_qs(parts.query)
    unknown = set(query) - PARAMETERS
    if unknown:
        raise EngineURLError(f"--engine: unknown URL parameters {', '.join(sorted(unknown))}")
    password = unquote(parts.password) if parts.password is not None else None
    file_name = password_file or next(iter(query.get("password_file", ())), None)
    if file_name is not None:
        password = read_password(file_name)
    sentinel_file = sentinel_password_file or next(
        iter(query.get("sentinel_password_file", ())), None
    )
    if sentinel_file is not None and not sentinel:
        raise EngineURLError("--engine: a Sentinel password goes with a redis+sentinel:// URL")
    prefix = (query.get("prefix") or ["stompbroker"])[0]
    if not prefix or any(char in prefix for char in "*?[]{}: "):
        raise EngineURLError(f"--engine: the prefix must be a plain name, got {prefix!r}")
    return EngineURL(
        tls=parts.scheme.startswith("rediss"),
        host=hosts[0][0],
        port=hosts[0][1],
        db=int(path),
        username=unquote(parts.username) if parts.username else None,
        password=password or None,
        prefix=prefix,
        sentinels=tuple(hosts) if sentinel else (),
        master=unquote(master),
        sentinel_password=(read_password(sentinel_file) or None) if sentinel_file else None,
    )


def _hosts(netloc: str, sentinel: bool) -> list[tuple[str, int]]:
    """
    :returns: the (host, port) pairs of a URL's host part: one, or with
        Sentinel one or more separated by commas.
    :raises EngineURLError: for a host part with no host, a bad port, or
        several hosts without Sentinel.
    """
    default = DEFAULT_SENTINEL_PORT if sentinel else DEFAULT_PORT
    hosts: list[tuple[str, int]] = []
    for item in netloc.split(","):
        try:
            parts = urlsplit(f"//{item}")
            port = parts.port or default
        except ValueError as error:
            raise EngineURLError(f"--engine: not a URL ({error})") from None
        if not parts.hostname:
            raise EngineURLError(
                "--engine: the URL names no host (redis://HOST:PORT/DB, or"
                " redis+sentinel://HOST:PORT,HOST:PORT/MASTER/DB)"
            )
        hosts.append((parts.hostname, port))
    if len(hosts) > 1 and not sentinel:
        raise EngineURLError(
            "--engine: several hosts go with Sentinel only"
            " (redis+sentinel://HOST:PORT,HOST:PORT/MASTER/DB)"
        )
    return hosts


def _host_port(host: str, port: int) -> str:
    """:returns: ``HOST:PORT``, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
