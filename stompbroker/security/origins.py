"""
The web origins whose pages may use the broker: ``--allowed-origin PATTERN``.

A browser names the page that opens a WebSocket or calls the management API
in the ``Origin`` header (``https://app.example.com``); other clients send
none.  Without ``--allowed-origin`` the WebSocket endpoint takes any origin
(as RabbitMQ Web-STOMP does), ``null`` too (a page opened as a file), and the
API answers the broker's own pages only.
With it, both take the broker's own pages and the origins the patterns match,
and refuse the others: the WebSocket handshake with a 403, the API with a 403
JSON error; the API answers the allowed origins' CORS preflights.  A request
without ``Origin`` is no browser's and is never refused for it.

A pattern is an origin, ``SCHEME://HOST[:PORT]``, whose host may start with
``*.`` for any subdomain (``https://*.example.com``), or ``*`` for every
origin.  Matching ignores case, as origins do.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from attrs import frozen

__all__ = ["NO_OTHER_ORIGINS", "AllowedOrigins", "is_same_origin", "parse_origin_pattern"]

#: The pattern that allows every origin.
ANY = "*"


def parse_origin_pattern(text: str) -> str:
    """
    :param text: ``*``, or ``SCHEME://HOST[:PORT]`` with an optional ``*.`` before the host.
    :returns: the pattern, in lower case.
    :raises ValueError: naming what is wrong.
    """
    pattern = text.strip().lower()
    if pattern == ANY:
        return pattern
    parts = urlsplit(pattern)
    host = parts.netloc.removeprefix("*.")
    if (
        parts.scheme not in ("http", "https")
        or not host
        or "*" in host
        or "@" in host
        or parts.path
        or parts.query
        or parts.fragment
    ):
        raise ValueError(
            f"{text!r} is not an origin pattern: give http(s)://HOST[:PORT], with *. before"
            " HOST for its subdomains, or * for every origin"
        )
    return pattern


def is_same_origin(origin: str, host: str) -> bool:
    """
    :param origin: the ``Origin`` header.
    :param host: the ``Host`` header of the same request.
    :returns: whether the page came from the broker itself (its host and port).
    """
    return urlsplit(origin.lower()).netloc == host.lower()


@frozen
class AllowedOrigins:
    """
    The ``--allowed-origin`` patterns (see the module notes).

    :ivar patterns: as :func:`parse_origin_pattern` returns them; none means the option is unset.
    """

    patterns: tuple[str, ...] = ()

    @property
    def configured(self) -> bool:
        """Whether any pattern was given."""
        return bool(self.patterns)

    def matches(self, origin: str) -> bool:
        """:returns: whether a pattern matches ``origin``."""
        origin = origin.lower()
        for pattern in self.patterns:
            if pattern == ANY or fnmatchcase(origin, pattern):
                return True
            # ``https://*.example.com`` also stands for the host itself.
            if "://*." in pattern and origin == pattern.replace("://*.", "://", 1):
                return True
        return False


#: No ``--allowed-origin``.
NO_OTHER_ORIGINS = AllowedOrigins()
