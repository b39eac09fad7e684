"""
The streams a login may read, as the broker's management API lists them.

A batch read of a stream that shows no message fails (an empty stream, or
more often a misspelt name); the error is more use when it names the streams
that do exist.  STOMP has no way to list destinations, so this asks the web
port's ``GET /api/destinations`` with the read's own credentials: the broker
lists there only the destinations that login may ``read``, so a user learns
of no stream the access rules hide.  The listing is a courtesy to the error
message: when the API cannot be reached or refuses, the error says why
instead, and the read fails as it would have.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from attrs import frozen

from sparkjobs.datasource.client import ConnectSettings, parse_url

#: Streams named in an error, at most: a broker may hold thousands.
SHOWN = 20


@frozen
class StreamListing:
    """
    :ivar streams: ``(name, messages kept)`` of each stream the login may read,
        ``None`` when the broker could not be asked.
    :ivar why_not: the reason it could not, for the message.
    """

    streams: tuple[tuple[str, int], ...] | None
    why_not: str = ""

    def describe(self) -> str:
        """:returns: a sentence for an error message."""
        if self.streams is None:
            return f"the streams could not be listed ({self.why_not})"
        if not self.streams:
            return "this login may read no stream that exists"
        named = ", ".join(f"{name} ({kept} kept)" for name, kept in self.streams[:SHOWN])
        more = len(self.streams) - SHOWN
        return f"the streams this login may read: {named}" + (
            f" and {more} more" if more > 0 else ""
        )


def api_url(settings: ConnectSettings, given: str | None) -> str | None:
    """
    :param given: option ``apiUrl``, if given.
    :returns: the web port's base URL: ``given``, else that of a ``ws://`` or
        ``wss://`` URL (the web port serves both), else ``None``.
    """
    if given:
        return given.rstrip("/")
    scheme, host, port, _ = parse_url(settings.url)
    if scheme in ("ws", "wss"):
        return f"{'https' if scheme == 'wss' else 'http'}://{host}:{port}"
    return None


def readable_streams(settings: ConnectSettings, base: str | None, bearer: bool) -> StreamListing:
    """
    :param base: the web port's URL (see :func:`api_url`).
    :param bearer: whether ``settings.passcode`` is a token (option ``token``).
    :returns: the streams the login may read, newest names as the broker lists them.
    """
    if base is None:
        return StreamListing(None, "give option apiUrl, the broker's web port, to have them named")
    request = urllib.request.Request(f"{base}/api/destinations")
    if bearer and settings.passcode:
        request.add_header("Authorization", f"Bearer {settings.passcode}")
    elif settings.login is not None:
        pair = f"{settings.login}:{settings.passcode or ''}".encode()
        request.add_header("Authorization", f"Basic {base64.b64encode(pair).decode('ascii')}")
    context = None
    if urlsplit(base).scheme == "https":
        context = ssl.create_default_context(cafile=settings.ca_file)
    try:
        with urllib.request.urlopen(request, timeout=settings.timeout, context=context) as answer:
            rows: Any = json.load(answer)
    except urllib.error.HTTPError as error:
        return StreamListing(None, f"{base}/api/destinations answered {error.code} {error.reason}")
    except (OSError, ValueError) as error:
        return StreamListing(None, f"{base}/api/destinations: {error}")
    streams = sorted(
        (row["destination"], int(row.get("depth") or 0))
        for row in rows
        if isinstance(row, dict) and row.get("kind") == "stream"
    )
    return StreamListing(tuple(streams))
