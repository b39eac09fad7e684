"""
Who a connected client is, once logged in: the avatar of the broker's ``twisted.cred`` realm.

It lives apart from the checkers and the portal because all of them, and the
access rules, speak of it: the checkers' chain makes identities, the realm hands
them out, and :mod:`stompbroker.security.access` decides by them.
"""

from __future__ import annotations

import json
from typing import Any

from attrs import field, frozen
from zope.interface import Attribute, Interface, implementer

__all__ = [
    "ANONYMOUS_IDENTITY",
    "INFO_BYTES",
    "IHostAdmission",
    "IIdentity",
    "Identity",
    "avatar_name",
    "member_info",
]

#: The most a login's ``info`` may hold, as JSON: it travels with every
#: presence event of the user, to every watcher, and into the cluster's Redis.
INFO_BYTES = 4096


class IIdentity(Interface):
    """The avatar the broker's realm gives an authenticated (or anonymous) client."""

    name = Attribute("The user name; ``anonymous`` for an anonymous client.")
    groups = Attribute("A frozenset of the groups the user belongs to.")
    anonymous = Attribute("``True`` for a client that did not log in.")


class IHostAdmission(Interface):
    """
    Rights (an identity's ``granted``) that must also admit the login to its
    virtual host: the application's, with ``--auth http:URL`` (its ``vhost_path``).
    """

    def admit(identity: Identity, vhost: str, address: str) -> Any:
        """
        :param vhost: the virtual host CONNECT selected, ``/`` for the default one.
        :param address: the client's address.
        :returns: a Deferred of ``identity``, failing with
            :class:`~stompbroker.security.credentials.InvalidCredentials` if refused.
        """


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
    :ivar info: what the login says of the user for presence (the application's
        ``info``, a token's ``info`` claim: a name, an avatar), shown to the
        other members of the destinations the user subscribes to; ``None``:
        nothing (see :func:`member_info`).
    """

    name: str
    groups: frozenset[str] = field(default=frozenset(), converter=frozenset)
    anonymous: bool = False
    granted: Any = field(default=None, repr=False)
    expires: float | None = None
    info: dict[str, Any] | None = field(default=None, repr=False)


def member_info(value: Any) -> dict[str, Any] | None:
    """
    Check what a login gives as the user's presence ``info``, as Pusher's
    ``user_info`` and Centrifugo's ``info``: a JSON object of at most
    :data:`INFO_BYTES`, so that every member of a destination can be sent it.

    :returns: the object, or ``None`` for ``None``.
    :raises ValueError: saying what is wrong with it.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("info must be a JSON object")
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > INFO_BYTES:
        raise ValueError(f"info holds {size} bytes as JSON, more than {INFO_BYTES}")
    return value


#: The identity of every client that did not log in.
ANONYMOUS_IDENTITY = Identity("anonymous", anonymous=True)


def avatar_name(avatar_id: str | bytes) -> str:
    """
    :param avatar_id: what a checker accepted: Twisted's own checkers give ``bytes``
        or ``str``, depending on the checker.
    :returns: the user name as text, undecodable bytes replaced.
    """
    if isinstance(avatar_id, bytes):
        return avatar_id.decode("utf-8", errors="replace")
    return avatar_id
