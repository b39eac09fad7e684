"""
Property tests: whatever :func:`encode` writes, :class:`FrameParser` reads back
equal, however the stream is cut.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stompbroker.protocol.encoder import encode, escape, message_prefix, message_tail, unescape
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.message import Message
from tests import strategies
from tests.support.parsing import parse_chunks

VERSIONS = st.sampled_from(["1.0", "1.1", "1.2"])


@st.composite
def streams(draw: st.DrawFn, version: str) -> tuple[list[Frame], list[bytes]]:
    """Several frames for ``version``, encoded with heart-beats between them, cut anywhere."""
    frames = draw(st.lists(strategies.frames(version), min_size=1, max_size=5))
    data = b"".join(draw(strategies.heart_beats) + encode(frame, version) for frame in frames)
    return frames, draw(strategies.split(data))


@given(streams("1.2"))
def test_frames_round_trip_in_1_2(stream: tuple[list[Frame], list[bytes]]) -> None:
    """
    Any 1.2 frames, headers full of escapes and non-ASCII, parse back equal however the stream
    is cut (STOMP 1.2, Value Encoding).
    """
    frames, chunks = stream
    assert parse_chunks(chunks, "1.2") == frames


@given(streams("1.1"))
def test_frames_round_trip_in_1_1(stream: tuple[list[Frame], list[bytes]]) -> None:
    """Any 1.1 frames parse back equal however the stream is cut (STOMP 1.1, Value Encoding)."""
    frames, chunks = stream
    assert parse_chunks(chunks, "1.1") == frames


@given(streams("1.0"))
def test_frames_round_trip_in_1_0(stream: tuple[list[Frame], list[bytes]]) -> None:
    """
    1.0 frames whose headers need no escaping parse back equal however the stream is cut (STOMP
    1.0).
    """
    frames, chunks = stream
    assert parse_chunks(chunks, "1.0") == frames


@given(strategies.unescaped_frames(), VERSIONS, st.data())
def test_connect_frames_round_trip_unescaped(
    frame: Frame, version: str, data: st.DataObject
) -> None:
    """
    CONNECT, STOMP and CONNECTED frames round-trip raw in every version (STOMP 1.2, Value
    Encoding).
    """
    assert parse_chunks(data.draw(strategies.split(encode(frame, version))), version) == [frame]


@given(strategies.text(), st.sampled_from(["1.1", "1.2"]))
def test_unescape_inverts_escape(text: str, version: str) -> None:
    """Escaping then unescaping any text gives it back (STOMP 1.2, Value Encoding)."""
    assert unescape(escape(text, version), version) == text


@given(st.data(), VERSIONS)
def test_message_fast_path_equals_encode_and_parses_back(data: st.DataObject, version: str) -> None:
    """
    message_prefix() + message_tail() equals encode() of the same MESSAGE frame, and parses back
    to it (STOMP 1.2, MESSAGE).
    """
    message: Message = data.draw(strategies.messages(version))
    subscription = data.draw(strategies.header_values(version))
    extra = tuple(
        data.draw(
            st.lists(
                st.tuples(strategies.header_names(version), strategies.header_values(version)),
                max_size=2,
            )
        )
    )
    frame = Frame(
        "MESSAGE",
        (
            ("subscription", subscription),
            *extra,
            ("message-id", message.message_id),
            ("destination", message.destination),
            *message.headers,
            ("content-length", str(len(message.body))),
        ),
        message.body,
    )
    wire = message_prefix(subscription, version, extra) + message_tail(message, version)
    assert wire == encode(frame, version)
    assert parse_chunks([wire], version) == [frame]
