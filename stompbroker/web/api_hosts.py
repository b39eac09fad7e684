"""
The management API's view of virtual hosts (``docs/virtual-hosts.md``): which
virtual host a call names (``?vhost=NAME``), the broker's name of a
destination the caller names as that host's clients do, and the other way.

Inside the broker, a virtual host's destinations have names that hold a
control character (:mod:`stompbroker.broker.routing.virtual_hosts`); the API
never shows those.  Every destination it answers with is named as its virtual
host's clients name it, beside a ``vhost`` field (``/`` for the default
host, as RabbitMQ names it).  A policy belongs to one virtual host (its
``vhost``, or ``?vhost=`` of the call that sets it).  A durable subscription's key
(``durable:["CLIENT-ID","NAME"]``) is mapped the same way, on its ``NAME``.

Rights: a destination of a virtual host with its own access file is checked
against that file, on the client's name; every other destination against the
broker's ``--access`` file.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.routing.virtual_hosts import (
    DEFAULT_HOST,
    HOST_MARKER,
    VirtualHost,
    VirtualHosts,
    host_of,
    split_name,
)
from stompbroker.broker.store.journal import DURABLE_KEY_PREFIX, durable_key, parse_durable_key
from stompbroker.web.api_guard import ApiError

__all__ = ["ApiHosts", "vhost_label"]


def vhost_label(destination: str) -> str:
    """:returns: the virtual host of a broker's destination name, ``/`` for the default host."""
    return host_of(destination) or DEFAULT_HOST


class ApiHosts:
    """
    The virtual hosts the API maps names for.

    :param hosts: the broker's :class:`VirtualHosts`, or ``None`` without
        virtual hosts (then every name is the broker's and ``?vhost=`` may only
        be ``/``).
    """

    def __init__(self, hosts: VirtualHosts | None) -> None:
        self.hosts = hosts

    @property
    def configured(self) -> bool:
        """Whether the broker has virtual hosts."""
        return self.hosts is not None

    def refused_in(self, vhost: str) -> str | None:
        """:returns: the virtual host a refusal names: none without virtual hosts."""
        return vhost if self.hosts is not None else None

    def named(self, name: str | None) -> VirtualHost | None:
        """
        :param name: ``?vhost=``'s value, ``None`` when absent.
        :returns: the virtual host it names, ``None`` for the default host.
        :raises ApiError: 404 for a name that is no virtual host.
        """
        if name is None or name == DEFAULT_HOST:
            return None
        host = self.hosts.hosts.get(name) if self.hosts is not None else None
        if host is None:
            served = sorted(self.hosts.hosts) if self.hosts is not None else []
            raise ApiError(
                404,
                "unknown virtual host",
                f"{name!r} is no virtual host of this broker; it serves"
                f" {', '.join([DEFAULT_HOST, *served])}",
            )
        return host

    def inward(self, host: VirtualHost | None, destination: str) -> str:
        """
        :param destination: a destination (or durable key) as ``host``'s clients name it.
        :returns: the broker's name of it.
        :raises ApiError: 400 for a name holding the virtual hosts' marker.
        """
        if self.hosts is not None and HOST_MARKER in destination:
            raise ApiError(
                400,
                "bad request",
                f"the destination {destination!r} holds the control character"
                f" {HOST_MARKER!r}; name it as clients do and pass ?vhost=",
            )
        if host is None:
            return destination
        durable = parse_durable_key(destination)
        if durable is not None:
            return durable_key((durable[0], host.prefix + durable[1]))
        return host.internal(destination)

    @staticmethod
    def outward(name: str) -> tuple[str, str]:
        """
        :param name: a broker's destination name (or durable key).
        :returns: its virtual host (``/`` for the default) and the name its clients know.
        """
        durable = parse_durable_key(name) if name.startswith(DURABLE_KEY_PREFIX) else None
        if durable is not None:
            client_id, durable_name = durable
            if durable_name.startswith(HOST_MARKER):
                host, _, rest = durable_name[1:].partition("/")
                return host, durable_key((client_id, rest))
            return DEFAULT_HOST, name
        return split_name(name)

    def access(self, host_name: str) -> Any:
        """:returns: the access rules of a virtual host's own file, or ``None`` for the broker's."""
        if self.hosts is None or host_name == DEFAULT_HOST:
            return None
        host = self.hosts.hosts.get(host_name)
        return host.access if host is not None else None

    def policy_host(self, given: Any, queried: str | None) -> str:
        """
        :param given: the ``vhost`` of a policy's body, if any.
        :param queried: the virtual host ``?vhost=`` named, if any.
        :returns: the virtual host of the policy: ``/`` unless either names another.
        :raises ApiError: 400 for a body's vhost that is no virtual host or differs from
            ``?vhost=``'s.
        """
        if given is None:
            return queried or DEFAULT_HOST
        if not isinstance(given, str):
            raise ApiError(400, "bad request", '"vhost" must be a virtual host\'s name')
        if queried is not None and given != queried:
            raise ApiError(400, "bad request", f'"vhost" {given!r} is not ?vhost=\'s {queried!r}')
        try:
            host = self.named(given)
        except ApiError as error:
            raise ApiError(400, "bad request", error.detail) from None
        return host.name if host is not None else DEFAULT_HOST
