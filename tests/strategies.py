"""
Hypothesis strategies shared by the tests: STOMP frames, messages and streams,
and destination names and subscription patterns over a small alphabet.

Text strategies deliberately favour the characters that escaping is about
(colon, LF, CR, backslash) and reach far beyond ASCII; per-version strategies
yield only what that version can represent, since a STOMP 1.0 header cannot
hold a line break and a 1.0 header name cannot hold a colon.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import strategies as st

from stompbroker.protocol.frames import (
    CLIENT_COMMANDS,
    SERVER_COMMANDS,
    UNESCAPED_COMMANDS,
    Frame,
)
from stompbroker.protocol.message import Message

#: Headers the MESSAGE encoder writes itself; a Message's user headers never hold them.
MESSAGE_OWN_HEADERS = frozenset({"content-length", "destination", "message-id", "subscription"})

#: Characters with a meaning in STOMP's header syntax.
SPECIAL_CHARACTERS = ":\n\r\\"

#: Any character that UTF-8 can encode (no lone surrogates), NUL included.
_any_character = st.characters(exclude_categories=["Cs"])


def text(forbidden: str = "", min_size: int = 0, max_size: int = 16) -> st.SearchStrategy[str]:
    """
    Text rich in STOMP's special characters and in non-ASCII.

    :param forbidden: characters the text must not hold.
    """
    special = [c for c in SPECIAL_CHARACTERS if c not in forbidden]
    alphabet = st.characters(exclude_categories=["Cs"], exclude_characters=forbidden)
    if special:
        alphabet = st.one_of(st.sampled_from(special), alphabet)
    return st.text(alphabet, min_size=min_size, max_size=max_size)


def header_names(version: str = "1.2", raw: bool = False) -> st.SearchStrategy[str]:
    """
    Header names a frame may carry in ``version``, or unescaped if ``raw``
    (as in CONNECT); never ``content-length``, which frame strategies place
    themselves.  A few common names make repeated headers likely.
    """
    forbidden = ":\n\r" if raw or version == "1.0" else ""
    names = text(forbidden) | st.sampled_from(["destination", "receipt", "foo", "ack"])
    names = names.filter(lambda name: name != "content-length")
    return _untrimmed(names) if raw or version == "1.0" else names


def header_values(version: str = "1.2", raw: bool = False) -> st.SearchStrategy[str]:
    """Header values a frame may carry in ``version``, or unescaped if ``raw``."""
    if raw or version == "1.0":
        return _untrimmed(text("\n\r"))
    return text("")


def _untrimmed(texts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """
    Only texts a 1.0 frame (or a CONNECT that settles on 1.0) reads back as
    sent: its header names and values are read with the spaces and tabs
    around them trimmed (:mod:`stompbroker.protocol.header_decoding`).
    """
    return texts.filter(lambda value: value == value.strip(" \t"))


def commands() -> st.SearchStrategy[str]:
    """
    Command lines the parser must carry through unchanged: every STOMP command
    (the parser refuses others), except the commands whose headers are never
    escaped (those change the parser's version, so :func:`unescaped_frames`
    covers them).
    """
    return st.sampled_from(sorted((CLIENT_COMMANDS | SERVER_COMMANDS) - UNESCAPED_COMMANDS))


@st.composite
def frames(
    draw: st.DrawFn,
    version: str = "1.2",
    command_strategy: st.SearchStrategy[str] | None = None,
    raw: bool = False,
) -> Frame:
    """
    A frame that encodes for ``version`` and parses back equal: when its
    binary body holds NUL (and at random otherwise) it carries a correct
    ``content-length``, at a random position among its headers.
    """
    command = draw(command_strategy if command_strategy is not None else commands())
    pair = st.tuples(header_names(version, raw), header_values(version, raw))
    headers = draw(st.lists(pair, max_size=6))
    body = draw(st.binary(max_size=64))
    if b"\0" in body or draw(st.booleans()):
        index = draw(st.integers(0, len(headers)))
        headers.insert(index, ("content-length", str(len(body))))
    return Frame(command, tuple(headers), body)


def unescaped_frames() -> st.SearchStrategy[Frame]:
    """CONNECT, STOMP and CONNECTED frames, whose headers are never escaped."""
    return frames(command_strategy=st.sampled_from(sorted(UNESCAPED_COMMANDS)), raw=True)


#: What may stand between frames: nothing, or heart-beat EOLs.
heart_beats = st.sampled_from([b"", b"\n", b"\r\n", b"\n\r\n\n"])


@st.composite
def split(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut at arbitrary points (empty chunks included)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=8)))
    bounds = [0, *cuts, len(data)]
    return [data[start:stop] for start, stop in pairwise(bounds)]


@st.composite
def messages(draw: st.DrawFn, version: str = "1.2") -> Message:
    """A published message whose headers ``version`` can represent."""
    names = header_names(version).filter(lambda name: name not in MESSAGE_OWN_HEADERS)
    headers = draw(st.lists(st.tuples(names, header_values(version)), max_size=5))
    return Message(
        destination=draw(header_values(version)),
        message_id=draw(header_values(version)),
        headers=tuple(headers),
        body=draw(st.binary(max_size=64)),
    )


# -- destinations and subscription patterns --------------------------------------------

#: The segments of destination names and patterns: few, so that patterns overlap often.
SEGMENTS = ["a", "b", "c"]
#: The two separators, which the wildcard rules treat alike.
separators = st.sampled_from(["/", "."])


@st.composite
def spelled(draw: st.DrawFn, segments: list[str]) -> str:
    """Join segments with random separators and an optional leading one."""
    text = draw(st.sampled_from(["", "/", "."])) + segments[0]
    for segment in segments[1:]:
        text += draw(separators) + segment
    return text


@st.composite
def patterns(draw: st.DrawFn) -> str:
    """A valid pattern over a small alphabet, with ``*`` and an optional tail."""
    body = draw(st.lists(st.sampled_from([*SEGMENTS, "*"]), max_size=3))
    tail = draw(st.sampled_from([None, "#", ">"]))
    segments = body + ([tail] if tail else [])
    if not segments:
        segments = [draw(st.sampled_from(SEGMENTS))]
    return draw(spelled(segments))


@st.composite
def destinations(draw: st.DrawFn) -> str:
    """A wildcard-free destination over the same alphabet."""
    return draw(spelled(draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4))))
