"""
The code blocks of the docs that are marked runnable, read from the Markdown.

A block is runnable when the line before its opening fence is an HTML comment
``<!-- runnable -->``, optionally with words that say what it needs
(``<!-- runnable: broker expect="got 10" -->``); GitHub and every Markdown
renderer hide the comment, so the reader sees a plain example. The words:

- ``broker``: a broker the test started; the default ports ``61613`` (STOMP)
  and ``15674`` (web) in the block stand for that broker's ports.
- ``cluster``: two nodes of the redis engine on one ``redis-server``; ``61613``
  and ``61614`` stand for the nodes' STOMP ports and ``6379`` for Redis's.
- ``serves=PORT,PORT``: a program that serves until stopped; each port stands
  for a free one, and the block passes once every one accepts connections.
- ``until=TEXT``: a program that runs until stopped; it passes once TEXT is in
  its output.
- ``expect=TEXT``: TEXT must be in the output (the page's text, for HTML).
- ``browser``: an HTML page, opened in headless Chromium.

A marker not followed by a fence is a mistake in the docs, and an error here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

from attrs import frozen

#: The pages whose blocks are read: the README and every page under docs/.
MARKER = re.compile(r"^<!--\s*runnable(?::(?P<words>.*?))?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<language>[\w+-]*)\s*$")
#: The languages a block may be written in, and how each is run.
LANGUAGES = {"python": "python", "py": "python", "sh": "shell", "bash": "shell", "html": "html"}
#: The words a marker may hold without a value.
FLAGS = frozenset({"broker", "cluster", "browser"})
#: The words a marker may hold with a value.
OPTIONS = frozenset({"serves", "until", "expect"})


class MarkerError(Exception):
    """A runnable marker that cannot be run: no fence after it, an unknown word or language."""


@frozen
class Block:
    """
    One runnable code block.

    :ivar path: the page it is on.
    :ivar line: the line of its opening fence, from 1.
    :ivar kind: ``python``, ``shell`` or ``html``.
    :ivar code: its text.
    :ivar flags: the marker's words without a value.
    :ivar options: the marker's words with one.
    """

    path: Path
    line: int
    kind: str
    code: str
    flags: frozenset[str]
    options: dict[str, str]

    @property
    def name(self) -> str:
        """Where it is, as ``docs/page.md:12``, for test ids and failures."""
        return f"{self.path.parent.name}/{self.path.name}:{self.line}"

    def serves(self) -> list[int]:
        """:returns: the ports it listens on, as written in the block."""
        value = self.options.get("serves", "")
        return [int(port) for port in value.split(",") if port]


def parse_marker(words: str, where: str) -> tuple[frozenset[str], dict[str, str]]:
    """
    :returns: the flags and the options of a marker's words.
    :raises MarkerError: for a word that is neither.
    """
    flags: set[str] = set()
    options: dict[str, str] = {}
    for word in shlex.split(words):
        key, equals, value = word.partition("=")
        if equals and key in OPTIONS:
            options[key] = value
        elif not equals and key in FLAGS:
            flags.add(key)
        else:
            raise MarkerError(f"{where}: unknown word {word!r} in a runnable marker")
    return frozenset(flags), options


def read_blocks(path: Path, text: str) -> Iterator[Block]:
    """
    :param path: the page, for names and errors.
    :param text: its Markdown.
    :returns: its runnable blocks, in order.
    :raises MarkerError: for a marker that marks no block it can run.
    """
    lines = text.splitlines()
    for index, line in enumerate(lines):
        marker = MARKER.match(line)
        if marker is None:
            continue
        where = f"{path}:{index + 1}"
        fence = FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
        if fence is None:
            raise MarkerError(f"{where}: a runnable marker must be followed by a ``` fence")
        kind = LANGUAGES.get(fence.group("language"))
        if kind is None:
            raise MarkerError(f"{where}: cannot run a block of {fence.group('language')!r}")
        body: list[str] = []
        for candidate in lines[index + 2 :]:
            if candidate.startswith("```"):
                break
            body.append(candidate)
        else:
            raise MarkerError(f"{where}: the block is never closed")
        flags, options = parse_marker(marker.group("words") or "", where)
        yield Block(path, index + 2, kind, "\n".join(body) + "\n", flags, options)


def substitute(code: str, ports: dict[int, int]) -> str:
    """:returns: ``code`` with each documented port (a whole number) replaced by the test's."""
    for documented, actual in ports.items():
        code = re.sub(rf"(?<![\d.]){documented}(?!\d)", str(actual), code)
    return code


#: A shell command that starts the broker with twistd.
_TWISTD_BROKER = re.compile(r"^(?P<start>.*?\btwistd\b.*?\bstompbroker\b)(?P<rest>.*)$", re.DOTALL)


def own_web_port(code: str, port: int) -> str:
    """
    :returns: shell ``code`` whose ``twistd ... stompbroker`` commands that leave the
        web port at its default (15674, which a broker the developer runs may hold)
        serve it on ``port`` instead; commands that name ``--http`` (on any of their
        continued lines) keep theirs.
    """
    commands, command = [], ""
    for line in code.splitlines(keepends=True):
        command += line
        if not line.rstrip("\n").endswith("\\"):
            commands.append(command)
            command = ""
    commands.append(command)
    return "".join(_with_web_port(text, port) for text in commands)


def _with_web_port(command: str, port: int) -> str:
    found = _TWISTD_BROKER.match(command)
    if not found or "--http" in command:
        return command
    return f"{found['start']} --http tcp:{port}:interface=127.0.0.1{found['rest']}"
