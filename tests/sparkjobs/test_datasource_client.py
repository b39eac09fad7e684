"""The data source's STOMP framing: frames in, whatever pieces the bytes arrive in."""

from __future__ import annotations

from sparkjobs.datasource.client import FrameDecoder, encode


def test_frames_cut_anywhere_decode_whole_with_binary_bodies_and_escapes() -> None:
    wire = (
        b"\n"
        + encode("MESSAGE", [("x-stream-offset", "0"), ("a:b", "line\nnext")], b"\x00\xff")
        + b"\n\r\n"
        + b"MESSAGE\nx:1\nx:2\n\nno length\x00"
        + encode("RECEIPT", [("receipt-id", "r1")])
    )
    for cut in range(1, len(wire)):
        decoder = FrameDecoder()
        frames = decoder.feed(wire[:cut]) + decoder.feed(wire[cut:])
        assert [frame.command for frame in frames] == ["MESSAGE", "MESSAGE", "RECEIPT"]
        first, second, receipt = frames
        assert first.headers["a:b"] == "line\nnext" and first.body == b"\x00\xff"
        assert (second.headers["x"], second.body) == ("1", b"no length")
        assert receipt.headers["receipt-id"] == "r1"
