"""
Feeding bytes to :class:`stompbroker.protocol.parser.FrameParser` the ways a
transport may cut them: whole, split in two at every index, and one byte at a
time (STYLE §10), for the parser's tests and the encoder's round trips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser


def chunkings(data: bytes) -> Iterator[list[bytes]]:
    """``data`` whole, split in two at every index, and one byte at a time."""
    yield [data]
    for index in range(1, len(data)):
        yield [data[:index], data[index:]]
    yield [data[index : index + 1] for index in range(len(data))]


def parse_chunks(chunks: list[bytes], version: str | None = None, **limits: int) -> list[Frame]:
    """
    :param version: the version the parser reads, as CONNECT would have set it.
    :param limits: the parser's limits (``max_frame_size`` and the like).
    :returns: the frames one fresh parser makes of ``chunks``, fed in order.
    """
    parser = FrameParser(**limits)
    if version is not None:
        parser.version = version
    frames: list[Frame] = []
    for chunk in chunks:
        frames.extend(parser.receive_data(chunk))
    return frames


def assert_parses(data: bytes, expected: list[Frame], **options: object) -> None:
    """Assert that ``data``, however it is cut, parses to ``expected``, with ``bytes`` bodies."""
    for chunks in chunkings(data):
        frames = parse_chunks(chunks, **options)  # type: ignore[arg-type]
        assert frames == expected, f"fed as {chunks!r}"
        assert all(type(frame.body) is bytes for frame in frames)


def assert_rejects(
    data: bytes, error_type: type[ProtocolError], match: str | None, **options: object
) -> ProtocolError:
    """
    Assert that ``data``, however it is cut, raises ``error_type`` matching ``match``.

    :returns: the error raised when ``data`` is fed whole.
    """
    errors = []
    for chunks in chunkings(data):
        with pytest.raises(error_type, match=match) as caught:
            parse_chunks(chunks, **options)  # type: ignore[arg-type]
        errors.append(caught.value)
    return errors[0]
