"""
The access file: its TOML read into an :class:`~stompbroker.security.access.AccessPolicy`,
with errors that say where, and :class:`AccessControl`, the policy in force that
a reload of the file (on SIGHUP) replaces for every connection at once.

The file's format, and what its rights allow, are :mod:`stompbroker.security.access`'s.
"""

from __future__ import annotations

import re
import tomllib
from typing import TYPE_CHECKING, Any

from stompbroker.broker.routing.syntax import validate_pattern
from stompbroker.protocol.errors import InvalidDestination
from stompbroker.security.access import ANONYMOUS, RIGHTS, AccessPolicy, Principal

if TYPE_CHECKING:
    from stompbroker.security.identity import Identity

__all__ = ["AccessControl", "AccessFileError", "load_policy", "parse_policy"]

#: Where tomllib puts the position in its error messages.
_TOML_POSITION = re.compile(r"\(at line (\d+), column \d+\)|\(at end of document\)")


class AccessFileError(ValueError):
    """
    An access file cannot be read, is not TOML, or says something this module does not know.

    :param path: the file, or ``<string>`` for parsed text.
    :param reason: what is wrong.
    :param line: the 1-based line, when it can be told.
    :param field: the dotted path of the offending value, e.g. ``users.alice.read[1]``.
    """

    def __init__(
        self, path: str, reason: str, line: int | None = None, field: str | None = None
    ) -> None:
        where = path if line is None else f"{path}:{line}"
        if field is not None:
            where = f"{where}: {field}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.reason = reason
        self.line = line
        self.field = field


_RIGHT_KEYS = frozenset(RIGHTS)
_GROUP_KEYS = _RIGHT_KEYS | {"members"}
_TOP_KEYS = ("anonymous", "users", "groups")


class _Reader:
    """Turns a parsed access file into rules, with errors that say where."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def error(
        self, reason: str, table: list[str], key: str | None = None, index: int | None = None
    ) -> AccessFileError:
        parts = table + ([key] if key is not None else [])
        field = ".".join(parts) + (f"[{index}]" if index is not None else "")
        return AccessFileError(self.path, reason, self._line_of(parts), field)

    def _line_of(self, parts: list[str]) -> int | None:
        """
        Find where a dotted key is written, for error messages.

        Best effort: the deepest ``[a.b]`` header that leads to it, then the
        first line in that section that starts with the next key; a key written
        inside an inline table points to the line of its table.
        """
        headers: dict[str, int] = {}
        for number, line in enumerate(self.lines, start=1):
            text = line.split("#")[0].replace(" ", "").replace('"', "").replace("'", "")
            if text.startswith("[") and text.endswith("]"):
                headers.setdefault(text.strip("[]"), number)
        for depth in range(len(parts), -1, -1):
            if depth == 0:
                start = 0
            elif ".".join(parts[:depth]) in headers:
                start = headers[".".join(parts[:depth])]
            else:
                continue
            if depth == len(parts):
                return start
            for number, line in enumerate(self.lines[start:], start=start + 1):
                stripped = line.strip()
                if stripped.startswith("["):
                    break
                if re.match(rf"[\"']?{re.escape(parts[depth])}[\"']?\s*[=.]", stripped):
                    return number
            return start or None
        return None

    def table(self, value: Any, path: list[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(f"must be a table, not {_kind(value)}", path)
        return value

    def strings(self, value: Any, table: list[str], key: str) -> list[str]:
        if not isinstance(value, list):
            raise self.error(f"must be a list of strings, not {_kind(value)}", table, key)
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"must be a string, not {_kind(item)}", table, key, index)
        return value

    def rights(self, value: Any, table: list[str], allowed: frozenset[str]) -> dict[str, list[str]]:
        entries = self.table(value, table)
        for key in entries:
            if key not in allowed:
                raise self.error(f"unknown key; expected {', '.join(sorted(allowed))}", table, key)
        rights = {}
        for right in RIGHTS:
            if right not in entries:
                continue
            patterns = self.strings(entries[right], table, right)
            for index, pattern in enumerate(patterns):
                try:
                    validate_pattern(pattern)
                except InvalidDestination as error:
                    raise self.error(
                        f"invalid pattern {pattern!r}: {error.detail}", table, right, index
                    ) from None
            rights[right] = patterns
        return rights

    def policy(self, document: dict[str, Any]) -> AccessPolicy:
        for key in document:
            if key not in _TOP_KEYS:
                raise self.error(f"unknown key; expected the tables {', '.join(_TOP_KEYS)}", [key])
        rules: dict[Principal, dict[str, list[str]]] = {}
        members: dict[str, list[str]] = {}
        if "anonymous" in document:
            rules[ANONYMOUS] = self.rights(document["anonymous"], ["anonymous"], _RIGHT_KEYS)
        for name, value in self.table(document.get("users", {}), ["users"]).items():
            rules[("user", name)] = self.rights(value, ["users", name], _RIGHT_KEYS)
        for name, value in self.table(document.get("groups", {}), ["groups"]).items():
            rules[("group", name)] = self.rights(value, ["groups", name], _GROUP_KEYS)
            if "members" in value:
                members[name] = self.strings(value["members"], ["groups", name], "members")
        return AccessPolicy(rules, members)


_KINDS = {dict: "a table", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}


def _kind(value: Any) -> str:
    """:returns: how the error messages name the TOML type of ``value``."""
    return _KINDS.get(type(value), "a number or date")


def parse_policy(text: str, path: str = "<string>") -> AccessPolicy:
    """
    Read the rules of an access file (see the module docstring).

    :param text: the file's content.
    :param path: the name used in error messages.
    :raises AccessFileError: if the text is not TOML, holds an unknown table or
        key, a value of the wrong type, or an invalid pattern.
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        position = _TOML_POSITION.search(message)
        line = None
        if position is not None:
            line = int(position.group(1)) if position.group(1) else len(text.splitlines()) or 1
            message = message[: position.start()].rstrip()
        raise AccessFileError(path, f"not valid TOML: {message}", line) from None
    return _Reader(path, text).policy(document)


def load_policy(path: str) -> AccessPolicy:
    """
    Read an access file.

    :raises AccessFileError: if it cannot be read, or is invalid.
    """
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as error:
        raise AccessFileError(path, f"cannot read it: {error.strerror}") from None
    except UnicodeDecodeError:
        raise AccessFileError(path, "it is not UTF-8 text") from None
    return parse_policy(text, path)


class AccessControl:
    """
    The policy in force, which a reload replaces for every connection at once.

    Sessions hold this object, not a policy, and call :meth:`check` on every
    SEND and SUBSCRIBE, so that a reloaded file (on SIGHUP) applies to connected
    clients from their next frame.

    :param path: the access file, or ``None`` to allow everything.
    :raises AccessFileError: if the file cannot be read or is invalid.
    """

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.policy = load_policy(path) if path is not None else AccessPolicy.everything_allowed()

    def check(self, identity: Identity, right: str, destination: str) -> None:
        """
        :raises AccessDenied: if the current policy refuses (see :meth:`AccessPolicy.check`).
        :raises InvalidDestination: for an invalid wildcard pattern.
        """
        self.policy.check(identity, right, destination)

    def reload(self) -> AccessPolicy:
        """
        Read the access file again; without a file, nothing changes.

        :returns: the policy now in force.
        :raises AccessFileError: if the file cannot be read or is invalid; the
            previous policy then stays in force.
        """
        if self.path is not None:
            self.policy = load_policy(self.path)
        return self.policy
