"""
The configuration file, ``--config FILE``: TOML that holds the same settings as
the command line, grouped in sections (``docs/configuration.md``)::

    [listeners]
    listen = ["tcp:61613:interface=127.0.0.1"]

    [connections]
    max-connections = 10000

A key is the long option's name without ``--``, in the section that
:data:`SECTIONS` gives it; the value is what the option takes (a string or a
number), ``true``/``false`` for a flag, and a list of strings for a repeatable
option.  :func:`load` reads the file into :class:`Setting` values, each the
option it sets and where in the file it was written, and refuses an unknown
section or key, or a value of the wrong TOML type, with a :class:`ConfigError`
that gives the file, the line and the reason.  The options then parse each
setting's value exactly as they parse the command line's, so a value is checked
in one place, whichever way it came.

This module is the one place that maps the file to options, and it is a table:
a section is a name and the reader of its TOML value (:data:`READERS`).  The
plain sections are groups of options (:class:`OptionSection`); a section of
another shape (per-destination ``[[policy]]`` entries, ``[vhost.NAME]`` tables)
is added as one more reader, a callable from the section's value to the
settings it makes.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrs import frozen
from twisted.python import usage

__all__ = [
    "READERS",
    "SECTIONS",
    "ConfigError",
    "LOGIN_SECTIONS",
    "LoginTables",
    "OptionSection",
    "Setting",
    "load",
]


class ConfigError(usage.UsageError):
    """The configuration file cannot be read or holds a mistake: file, line and reason."""


@frozen
class Setting:
    """
    One option set by the file.

    :ivar option: the long option it sets, without ``--``.
    :ivar value: the option's argument as the command line would give it, or
        ``None`` for a flag.
    :ivar where: ``FILE:LINE`` (or ``FILE`` where the line is not known), for errors.
    :ivar key: the key as the file names it, ``[section] key``, for errors.
    """

    option: str
    value: str | None
    where: str
    key: str

    def arguments(self) -> list[str]:
        """:returns: the command-line arguments that set the same."""
        if self.value is None:
            return [f"--{self.option}"]
        return [f"--{self.option}={self.value}"]

    def explain(self, message: str) -> str:
        """
        :param message: a usage error about this setting's option, as the command
            line says it (``--max-connections takes a whole number, got 'abc'``).
        :returns: the same, said of the file's key and where it is.
        """
        prefix = f"--{self.option}"
        if message.startswith(prefix):
            message = message[len(prefix) :].lstrip(":")
            return f"{self.where}: {self.key}{'' if message.startswith(' ') else ' '}{message}"
        return f"{self.where}: {self.key}: {message}"


#: The kinds of value a key takes.
VALUE = "value"  # a string or a number: the option's argument
FLAG = "flag"  # true or false: whether the flag is given
LIST = "list"  # a list of strings (or one string): the repeatable option, once each


@frozen
class OptionSection:
    """
    A section whose keys are options.

    :ivar keys: option name -> :data:`VALUE`, :data:`FLAG` or :data:`LIST`.
    """

    keys: Mapping[str, str]

    def __call__(self, section: str, table: Any, lines: _Lines) -> list[Setting]:
        """
        :returns: the settings of the section's keys, in the file's order.
        :raises ConfigError: for a key that is not one of the section's, or a
            value of the wrong type.
        """
        if not isinstance(table, dict):
            raise ConfigError(f"{lines.where(section)}: [{section}] must be a table of keys")
        settings = []
        for key, value in table.items():
            where = lines.where(section, key)
            kind = self.keys.get(key)
            if kind is None:
                raise ConfigError(f"{where}: {_unknown_key(section, key)}")
            settings.extend(_settings(key, kind, value, where, f"[{section}] {key}"))
        return settings


def _settings(option: str, kind: str, value: Any, where: str, key: str) -> list[Setting]:
    """:raises ConfigError: for a value of the wrong TOML type."""
    if kind == FLAG:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} takes true or false, got {value!r}")
        return [Setting(option, None, where, key)] if value else []
    if kind == LIST:
        values = [value] if isinstance(value, str) else value
        if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
            raise ConfigError(f"{where}: {key} takes a list of strings, got {value!r}")
        return [Setting(option, item, where, key) for item in values]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: {key} takes a string or a number, got {value!r}")
    return [Setting(option, str(value), where, key)]


#: The plain sections: each option of ``twistd stompbroker`` that a file may set,
#: in the section of its kind.  ``--port`` (``listen`` says it in full),
#: ``--config`` itself and ``--version`` are left out.
SECTIONS: dict[str, OptionSection] = {
    "listeners": OptionSection(
        {
            "listen": LIST,
            "http": LIST,
            "trusted-proxy": LIST,
            "allowed-origin": LIST,
            "ws-ping-interval": VALUE,
            "ws-ping-timeout": VALUE,
            "ws-compression": FLAG,
            **dict.fromkeys(
                [
                    "ws-compression-min-size",
                    "ws-compression-window-bits",
                    "ws-compression-mem-level",
                ],
                VALUE,
            ),
        }
    ),
    "connections": OptionSection(
        dict.fromkeys(
            [
                "max-connections",
                "max-connections-per-address",
                "connect-timeout",
                "heartbeat",
                "heartbeat-min",
                "max-subscriptions",
                "max-pending-writes",
                "max-transactions",
                "max-transaction-frames",
                "resume-window",
                "vhost-unknown",
                "resume-buffer",
            ],
            VALUE,
        )
    ),
    "frames": OptionSection(
        dict.fromkeys(
            ["max-frame-size", "max-header-length", "max-headers", "frame-timeout"], VALUE
        )
    ),
    "flow": OptionSection(
        dict.fromkeys(
            [
                "slow-consumer",
                "slow-consumer-buffer",
                "memory-high",
                "memory-low",
                "shutdown-timeout",
                "rate-limit-messages",
                "rate-limit-bytes",
                "rate-limit-user-messages",
                "rate-limit-user-bytes",
                "rate-limit-over-time",
                "max-connection-rate",
            ],
            VALUE,
        )
    ),
    "security": OptionSection({"auth": LIST, "allow-anonymous": FLAG, "access": VALUE}),
    "delivery": OptionSection(
        {
            **dict.fromkeys(
                [
                    "prefetch",
                    "max-redeliveries",
                    "redelivery-delay",
                    "redelivery-multiplier",
                    "redelivery-max-delay",
                    "dead-letter-prefix",
                    "expired",
                    "ttl",
                ],
                VALUE,
            ),
            "persistent-queues": FLAG,
        }
    ),
    "store": OptionSection(
        dict.fromkeys(
            [
                "data-dir",
                "sync",
                "disk-free-limit",
                "queue-memory",
                "read-ahead",
                "stream-max-age",
                "stream-max-bytes",
            ],
            VALUE,
        )
    ),
    "cluster": OptionSection(
        dict.fromkeys(
            [
                "engine",
                "engine-password-file",
                "engine-sentinel-password-file",
                "engine-outage-hold",
                "engine-ping-timeout",
                "engine-wait-replicas",
                "engine-wait-timeout",
                "node-timeout",
                "workers",
            ],
            VALUE,
        )
    ),
    "stats": OptionSection(
        dict.fromkeys(["stats-dir", "stats-stream", "stats-interval", "monitor-interval"], VALUE)
    ),
    "process": OptionSection(dict.fromkeys(["log-level", "gc-threshold"], VALUE)),
    "webhooks": OptionSection({"webhook": VALUE, "webhook-secret-file": VALUE}),
}


@frozen
class LoginTables:
    """
    A section of one table per login, each of whose keys is one part of a
    repeatable option's value: ``[rate-limit.user.alice]`` with ``messages =
    "100/200"`` is ``--rate-limit-login=alice:messages=100/200``.

    :ivar option: the repeatable option each login's table sets once.
    :ivar inner: the one key under the section that holds the logins (``user``).
    :ivar keys: the keys a login's table may hold.
    """

    option: str
    inner: str
    keys: tuple[str, ...]

    def __call__(self, section: str, table: Any, lines: _Lines) -> list[Setting]:
        """
        :returns: one setting per login, in the file's order.
        :raises ConfigError: for anything but ``[SECTION.INNER.LOGIN]`` tables of
            the known keys, each a string or a number.
        """
        shape = f"[{section}.{self.inner}.LOGIN] tables"
        if not isinstance(table, dict) or set(table) - {self.inner}:
            raise ConfigError(f"{lines.where(section)}: [{section}] holds only {shape}")
        logins = table.get(self.inner, {})
        if not isinstance(logins, dict):
            raise ConfigError(f"{lines.where(section)}: [{section}] holds only {shape}")
        settings = []
        for login, rates in logins.items():
            header = f"{section}.{self.inner}.{login}"
            where = lines.where(header)
            if where == lines.path:
                # ``alice = {...}`` under ``[rate-limit.user]``.
                where = lines.where(f"{section}.{self.inner}", login)
            if not isinstance(rates, dict) or not rates:
                raise ConfigError(f"{where}: [{header}] must be a table of {', '.join(self.keys)}")
            parts = []
            for key, value in rates.items():
                if key not in self.keys:
                    raise ConfigError(
                        f"{lines.where(header, key)}: [{header}] {key} is not a setting;"
                        f" the keys are {', '.join(self.keys)}"
                    )
                if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    raise ConfigError(
                        f"{lines.where(header, key)}: [{header}] {key} takes a string or a"
                        f" number, got {value!r}"
                    )
                parts.append(f"{key}={value}")
            settings.append(
                Setting(self.option, f"{login}:{','.join(parts)}", where, f"[{header}]")
            )
        return settings


#: The sections of one table per login.
LOGIN_SECTIONS: dict[str, LoginTables] = {
    "rate-limit": LoginTables(
        "rate-limit-login", "user", ("messages", "bytes", "user-messages", "user-bytes")
    ),
}


def read_vhosts(section: str, table: Any, lines: _Lines) -> list[Setting]:
    """
    ``[vhost.NAME]`` tables, each ``--vhost=NAME:aliases=A|B,access=FILE``: a
    virtual host, the other host names that select it (``aliases``, a list of
    strings) and its access file (``access``).

    :returns: one setting per virtual host, in the file's order.
    :raises ConfigError: for anything but tables of those keys.
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{lines.where(section)}: [{section}] holds only [{section}.NAME] tables")
    settings = []
    for name, keys in table.items():
        header = f"{section}.{name}"
        if not isinstance(keys, dict):
            raise ConfigError(f"{lines.where(section, name)}: [{header}] must be a table")
        parts = []
        for key, value in keys.items():
            where = lines.where(header, key)
            if key == "aliases":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ConfigError(f"{where}: [{header}] aliases takes a list of host names")
                parts.append("aliases=" + "|".join(value))
            elif key == "access":
                if not isinstance(value, str):
                    raise ConfigError(f"{where}: [{header}] access takes a file name")
                parts.append(f"access={value}")
            else:
                raise ConfigError(
                    f"{where}: [{header}] {key} is not a setting; the keys are aliases, access"
                )
        settings.append(
            Setting("vhost", f"{name}:{','.join(parts)}", lines.where(header), f"[{header}]")
        )
    return settings


def _policies(section: str, tables: Any, lines: _Lines) -> list[Setting]:
    """
    ``[[policy]]`` tables, each ``name``, ``pattern`` and the policy's keys:
    one ``--policy NAME:KEY=VALUE,...`` each (checked there, docs/policies.md).

    :raises ConfigError: for anything but tables of strings and numbers with a name.
    """
    where = lines.where(section)
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{where}: policies are [[policy]] tables")
    settings = []
    for table in tables:
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: each [[policy]] needs a name")
        parts = []
        for key, value in table.items():
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise ConfigError(f"{where}: [[policy]] {name}: {key} takes a string or a number")
            if key != "name":
                parts.append(f"{key}={value}")
        settings.append(Setting("policy", f"{name}:{','.join(parts)}", where, f"[[policy]] {name}"))
    return settings


#: Every section's reader, by the section's name: the one table a new section goes in.
READERS: dict[str, Callable[[str, Any, _Lines], list[Setting]]] = {
    **SECTIONS,
    **LOGIN_SECTIONS,
    "vhost": read_vhosts,
    "policy": _policies,
}


def _unknown_key(section: str, key: str) -> str:
    """:returns: why ``key`` is refused in ``section``, and what was perhaps meant."""
    for other, reader in SECTIONS.items():
        if key in reader.keys:
            return f"[{section}] {key}: {key} belongs in [{other}]"
    known = [name for reader in SECTIONS.values() for name in reader.keys]
    guesses = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {guesses[0]}?)" if guesses else ""
    return f"[{section}] {key} is not a setting{hint}"


class _Lines:
    """
    Where each table and key of a TOML text is, found by reading its lines: tomllib
    keeps no positions.  Keys written as dotted keys or in inline tables are not
    found, and an error about them names the file alone.
    """

    _HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    _KEY = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=")

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self._found: dict[tuple[str, str], int] = {}
        table = ""
        for number, line in enumerate(text.splitlines(), start=1):
            header = self._HEADER.match(line)
            if header:
                table = header.group(1).replace('"', "").replace("'", "")
                self._found.setdefault((table, ""), number)
                continue
            key = self._KEY.match(line)
            if key:
                self._found.setdefault((table, key.group(1).strip("\"'")), number)

    def where(self, table: str, key: str = "") -> str:
        """:returns: ``FILE:LINE`` of the table (or its key), or ``FILE`` if not found."""
        line = self._found.get((table, key))
        return self.path if line is None else f"{self.path}:{line}"


_DECODE_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def load(path: str) -> list[Setting]:
    """
    Read a configuration file.

    :param path: the file, as ``--config`` names it.
    :returns: its settings, section by section in the file's order.
    :raises ConfigError: for a file that cannot be read, is not TOML, or holds
        an unknown section or key or a value of the wrong type.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ConfigError(f"{path}: cannot read it: {reason}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        position = _DECODE_POSITION.search(message)
        if position is None:
            raise ConfigError(f"{path}: not valid TOML: {message}") from None
        reason = message[: position.start()]
        raise ConfigError(
            f"{path}:{position.group(1)}: not valid TOML: {reason} (column {position.group(2)})"
        ) from None
    lines = _Lines(path, text)
    settings = []
    for section, value in document.items():
        reader = READERS.get(section)
        if reader is None:
            where = lines.where(section) if isinstance(value, dict) else lines.where("", section)
            raise ConfigError(f"{where}: {_unknown_section(section)}")
        settings.extend(reader(section, value, lines))
    return settings


def _unknown_section(name: str) -> str:
    """:returns: why ``name`` is refused at the top of the file."""
    for section, reader in SECTIONS.items():
        if name in reader.keys:
            return f"{name} belongs in the section [{section}]"
    return f"[{name}] is not a section; the sections are {', '.join(READERS)}"
