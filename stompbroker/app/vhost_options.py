"""
The options of virtual hosts (docs/virtual-hosts.md): ``--vhost`` (repeatable)
and ``--vhost-unknown``; in the configuration file, ``[vhost.NAME]`` tables
(:data:`stompbroker.app.config_file.READERS`) and ``vhost-unknown``.

:class:`VhostOptions` is a mixin of :class:`stompbroker.app.options.Options`
(twistd gathers ``optParameters`` and ``opt_`` methods along the class
hierarchy); ``virtual-hosts`` then holds the
:class:`~stompbroker.broker.routing.virtual_hosts.VirtualHosts` that
:func:`stompbroker.app.tap.makeService` gives the broker, or ``None``.
"""

from __future__ import annotations

from typing import Any

from twisted.python import usage

from stompbroker.app.option_values import named
from stompbroker.broker.routing.virtual_hosts import VirtualHost, VirtualHosts
from stompbroker.security.access_file import AccessControl, AccessFileError

__all__ = ["UNKNOWN_HOSTS", "VhostOptions", "parse_vhost"]

#: What ``--vhost-unknown`` may say of a ``host`` that names no virtual host.
UNKNOWN_HOSTS = ("default", "refuse")


def parse_vhost(description: str) -> tuple[str, tuple[str, ...], str | None]:
    """
    :param description: ``NAME[:aliases=HOST|HOST...][,access=FILE]``.
    :returns: the name, its aliases and its access file (``None`` for the listener's).
    :raises usage.UsageError: for an unknown key or a missing name.
    """
    name, _, rest = description.partition(":")
    aliases: tuple[str, ...] = ()
    access = None
    for part in filter(None, rest.split(",")):
        key, equals, value = part.partition("=")
        if key == "aliases" and equals:
            aliases = tuple(filter(None, value.split("|")))
        elif key == "access" and equals and value:
            access = value
        else:
            raise usage.UsageError(
                f"--vhost: {part!r} in {description!r}: the keys are aliases=HOST|HOST and"
                " access=FILE"
            )
    if not name:
        raise usage.UsageError(f"--vhost needs a name, got {description!r}")
    return name, aliases, access


class VhostOptions(usage.Options):
    """The virtual host options; ``virtual-hosts`` holds the result."""

    optParameters: list[Any] = named(
        [
            [
                "vhost-unknown",
                None,
                "default",
                "What a CONNECT whose host names no virtual host gets: 'default' (the default "
                "virtual host) or 'refuse' (an ERROR); '/' and no host are the default host.",
            ],
        ]
    )

    def opt_vhost(self, description: str) -> None:
        """A virtual host: NAME[:aliases=HOST|HOST][,access=FILE]; CONNECT's host header (the name or an alias) selects it, with its own destinations and, given a file, its own access rules (repeatable; see docs/virtual-hosts.md)."""  # noqa: E501
        self.setdefault("vhost", []).append(description)

    def check_vhosts(self) -> None:
        """
        Read the virtual hosts into ``virtual-hosts`` (``None`` for none), and
        their access files.

        :raises usage.UsageError: for a bad name, a name given twice, an access
            file that cannot be read or that no login could use, or a bad
            ``--vhost-unknown``.
        """
        if self["vhost-unknown"] not in UNKNOWN_HOSTS:
            raise usage.UsageError(
                f"--vhost-unknown must be {' or '.join(UNKNOWN_HOSTS)},"
                f" got {self['vhost-unknown']!r}"
            )
        descriptions = self.get("vhost", [])
        self["virtual-hosts"] = None
        if not descriptions:
            return
        hosts = []
        for description in descriptions:
            name, aliases, path = parse_vhost(description)
            access = None
            if path is not None:
                if not self.get("credCheckers"):
                    raise usage.UsageError(
                        f"--vhost {name}: access rules need --auth, which gives identities"
                    )
                try:
                    access = AccessControl(path)
                except AccessFileError as error:
                    raise usage.UsageError(f"--vhost {name}: {error}") from None
            try:
                hosts.append(VirtualHost(name, aliases, access))
            except ValueError as error:
                raise usage.UsageError(f"--vhost: {error}") from None
        try:
            self["virtual-hosts"] = VirtualHosts(
                hosts, refuse_unknown=self["vhost-unknown"] == "refuse"
            )
        except ValueError as error:
            raise usage.UsageError(f"--vhost: {error}") from None
