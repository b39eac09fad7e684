"""
Tests for :mod:`stompbroker.protocol.header_decoding`: escape decoding, and the
headers the parser reads for itself.
"""

from __future__ import annotations

import pytest

from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.header_decoding import negotiated_version, receipt_of, unescape


@pytest.mark.parametrize(
    "raw, version, expected",
    [
        ("a\\cb\\nc\\rd\\\\e", "1.2", "a:b\nc\rd\\e"),
        ("a\\cb\\nc\\rd\\\\e", "1.1", "a:b\nc\rd\\e"),
        ("a\\cb\\t\\", "1.0", "a\\cb\\t\\"),
        ("plain", "1.2", "plain"),
        ("\\\\n", "1.2", "\\n"),
    ],
)
def test_unescape_decodes_the_version_s_escapes(raw: str, version: str, expected: str) -> None:
    """unescape() decodes exactly the escapes the version defines (STOMP 1.2, Value Encoding)."""
    assert unescape(raw, version) == expected


@pytest.mark.parametrize("raw", ["\\t", "a\\", "\\C", "\\ "])
def test_unescape_rejects_undefined_escape(raw: str) -> None:
    """
    An undefined escape, or a trailing lone backslash, is a fatal protocol error (STOMP 1.2,
    Value Encoding).
    """
    with pytest.raises(MalformedFrame, match="undefined escape sequence"):
        unescape(raw, "1.2")


@pytest.mark.parametrize(
    "command, headers, expected",
    [
        ("CONNECT", (("accept-version", "1.0,1.1,1.2"),), "1.2"),
        ("STOMP", (("accept-version", " 1.1 , 1.0"),), "1.1"),
        ("CONNECT", (("host", "/"),), "1.0"),
        ("CONNECT", (("accept-version", "2.0"),), None),
        ("CONNECTED", (("version", "1.1"), ("accept-version", "1.2")), "1.1"),
        ("CONNECT", (("accept-version", "1.1"), ("accept-version", "1.2")), "1.1"),
    ],
)
def test_negotiated_version_is_the_best_one_offered(
    command: str, headers: tuple[tuple[str, str], ...], expected: str | None
) -> None:
    """
    The best supported version of accept-version (or CONNECTED's version), 1.0 without the
    header, none when nothing offered is supported (STOMP 1.2, Protocol Negotiation).
    """
    assert negotiated_version(command, headers) == expected


def test_receipt_of_reads_the_first_receipt_header() -> None:
    """A frame's receipt is its first receipt header (STOMP 1.2, Repeated Header Entries)."""
    assert receipt_of((("destination", "/queue/a"), ("receipt", "1"), ("receipt", "2"))) == "1"
    assert receipt_of((("destination", "/queue/a"),)) is None
