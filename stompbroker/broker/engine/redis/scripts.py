"""
The Lua scripts the redis engine runs: each one a file of ``lua/`` named for
what it does (the model is BullMQ's ``commands/*.lua``), the pieces several
share in ``lua/includes/``, spliced in where a line ``--- @include "NAME"``
stands.  Every key a script touches comes in ``KEYS``
(:mod:`.keys` names them), so that Redis Cluster can route it.

A script runs one way: ``EVALSHA`` with its SHA1, and ``EVAL`` with its text
where the server may not have it.  Through a client, :func:`run_script` sends
``EVALSHA`` and falls back to ``EVAL`` on ``NOSCRIPT`` (after a restart of
Redis), as redis-py's ``Script`` does.  Through the ordered writer, where a
command that failed cannot be sent again in its place, :class:`LoadedScripts`
knows which scripts a connection has sent: the first use on each connection
(a reconnection forgets them) goes as ``EVAL``, which also caches the script,
and every later one as ``EVALSHA``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from importlib.resources import files
from typing import Any

from redis.exceptions import NoScriptError

__all__ = ["LoadedScripts", "Script", "load", "run_script", "splice"]

#: A line that splices in a shared piece of ``lua/includes/``.
_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)


class Script(str):
    """
    A script's text (what ``EVAL`` sends; a ``str``, so that a test can hand it
    to any client's ``eval``), with its name and its SHA1 (what ``EVALSHA``
    sends).
    """

    name: str
    sha: str

    def __new__(cls, name: str, text: str) -> Script:
        script = super().__new__(cls, text)
        script.name = name
        script.sha = hashlib.sha1(text.encode()).hexdigest()
        return script


def _read(path: str) -> str:
    return (files(__package__) / "lua" / path).read_text(encoding="utf-8")


def splice(text: str, seen: set[str] | None = None) -> str:
    """
    :returns: ``text`` with each include's text in place of its line (each
        one once: ``seen`` holds those spliced in already).
    """
    seen = set() if seen is None else seen

    def included(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return ""
        seen.add(name)
        return splice(_read(f"includes/{name}.lua"), seen).rstrip("\n")

    return _INCLUDE.sub(included, text)


def load(name: str) -> Script:
    """
    :returns: the script of ``lua/NAME.lua``, its includes spliced in.
    :raises FileNotFoundError: for a script or include that is not there.
    """
    return Script(name, splice(_read(f"{name}.lua")))


async def run_script(client: Any, script: Script, numkeys: int, *keys_and_args: Any) -> Any:
    """
    Run ``script`` through a redis-py asyncio client (or pipeline-less
    connection): ``EVALSHA``, then ``EVAL`` if the server answers ``NOSCRIPT``.

    :returns: the script's reply.
    """
    try:
        return await client.evalsha(script.sha, numkeys, *keys_and_args)
    except NoScriptError:
        return await client.eval(script, numkeys, *keys_and_args)


class LoadedScripts:
    """
    The scripts one connection's server is known to hold, so that the writer
    sends each one's text only until the server has it: its first use on a
    connection goes as ``EVAL`` (which caches it), and once an ``EVAL`` of it
    was answered, the next ones as ``EVALSHA``.  The connection's callback
    (redis-py's ``register_connect_callback``) forgets them when it connects
    again, maybe to a restarted server with an empty script cache.
    """

    def __init__(self) -> None:
        self._known: set[str] = set()
        #: (index in the last pipeline, SHA) of each script sent there as ``EVAL``.
        self._sent: list[tuple[int, str]] = []

    def forget(self, connection: Any) -> None:
        """The connection (re)connected: the server may have none of them."""
        self._known.clear()

    def commands(self, commands: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
        """
        :param commands: a pipeline as the writer queued it, where a script
            runs as ``("EVALSHA", script, numkeys, ...)`` with a :class:`Script`.
        :returns: the pipeline to send: ``EVALSHA sha`` for a script the
            server holds, else ``EVAL text``.
        """
        self._sent = []
        sent: list[Sequence[Any]] = []
        for index, args in enumerate(commands):
            if args[0] == "EVALSHA" and isinstance(args[1], Script):
                script = args[1]
                if script.sha in self._known:
                    args = ("EVALSHA", script.sha, *args[2:])
                else:
                    self._sent.append((index, script.sha))
                    args = ("EVAL", str(script), *args[2:])
            sent.append(args)
        return sent

    def answered(self, replies: Sequence[Any]) -> None:
        """The last pipeline's replies: each script whose ``EVAL`` ran is held now."""
        for index, sha in self._sent:
            if not isinstance(replies[index], Exception):
                self._known.add(sha)
        self._sent = []
