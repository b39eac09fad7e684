"""
STOMP bytes for the load generator: frames encoded ahead, and a scanner instead of a parser.

The generator must stay cheaper than the broker it measures, so neither side of
it parses STOMP in full:

- a publisher's SEND frames differ only in their ``seq`` header (and ``ts`` and
  ``receipt`` where used), so :class:`SendTemplate` encodes everything else once
  and each frame costs two concatenations;
- a receiver never splits headers: :class:`Inbox` finds each frame's end by its
  NUL terminator and picks the ``seq`` header out with ``bytes.find``.  Every
  frame that has no ``seq`` takes a slow path that tells RECEIPT, ERROR and
  foreign MESSAGE frames apart.

That is sound because the suite writes every body itself, as bytes that hold no
NUL and no line that starts a header; it never relies on ``content-length`` to
find a frame's end.  Loss and duplication are counted per ``seq`` in a
``bytearray`` (one byte a message, grown as the run goes), which the scenario
merges across connections at the end.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable

#: Header pairs, in wire order.
Headers = tuple[tuple[str, str], ...]
#: A SEND header that varies with ``seq``: ``(name, value prefix, modulus)``.
Varying = tuple[str, str, int]

#: Versions offered in CONNECT, best first.
ACCEPT_VERSION = "1.2,1.1,1.0"
SEQ_KEY = b"\nseq:"
SEQ_PATTERN = re.compile(rb"\nseq:(\d+)")
TS_KEY = b"\nts:"
#: Bytes the seen-map grows by at least, so growing is rare.
GROWTH = 1 << 16


def encode_frame(command: str, headers: Iterable[tuple[str, str]], body: bytes = b"") -> bytes:
    """
    Encode a client frame without escaping.

    Header values come from the suite's own options (destinations, ids, the
    login), so they never hold the characters STOMP escapes.

    :param command: e.g. ``SUBSCRIBE``.
    :param headers: ``(name, value)`` pairs in wire order.
    :param body: the payload.
    :returns: the frame, NUL-terminated.
    """
    lines = [command, *(f"{name}:{value}" for name, value in headers)]
    return ("\n".join(lines) + "\n\n").encode("utf-8") + body + b"\x00"


def subscribe_frame(
    destination: str, subscription_id: str, ack_mode: str, extra: Headers = ()
) -> bytes:
    """
    :param extra: more headers, e.g. ``prefetch-count``.
    :returns: a SUBSCRIBE that asks for receipt ``sub-<id>``.
    """
    headers = [("destination", destination), ("id", subscription_id), ("ack", ack_mode), *extra]
    headers.append(("receipt", f"sub-{subscription_id}"))
    return encode_frame("SUBSCRIBE", headers)


def connect_frame(host: str, login: str | None, passcode: str | None) -> bytes:
    """
    The CONNECT every connection of the suite opens with; heart-beats off.

    :param host: the ``host`` header (RabbitMQ's virtual host; ``/`` is the default).
    :param login: user name, if the broker wants one.
    :param passcode: its password.
    """
    headers = [("accept-version", ACCEPT_VERSION), ("host", host), ("heart-beat", "0,0")]
    if login is not None:
        headers.append(("login", login))
    if passcode is not None:
        headers.append(("passcode", passcode))
    return encode_frame("CONNECT", headers)


def split_frames(stream: bytes) -> tuple[list[bytes], bytes]:
    """
    Cut a STOMP byte stream into whole frames, for the few frames of set-up.

    :param stream: bytes received so far.
    :returns: the complete frames (EOLs between frames dropped) and the rest.
    """
    frames = []
    position = 0
    while True:
        end = stream.find(b"\x00", position)
        if end < 0:
            break
        frames.append(stream[position:end].lstrip(b"\r\n"))
        position = end + 1
    return frames, stream[position:]


def command_of(frame: bytes) -> bytes:
    """:returns: a frame's command line (``frame`` as returned by :func:`split_frames`)."""
    return frame.split(b"\n", 1)[0].rstrip(b"\r")


def header_of(frame: bytes, name: str) -> str | None:
    """
    :param frame: a frame as returned by :func:`split_frames`.
    :param name: a header name.
    :returns: the first value of that header, still escaped, or ``None``.
    """
    head = frame.split(b"\n\n", 1)[0]
    key = b"\n" + name.encode() + b":"
    start = head.find(key)
    if start < 0:
        return None
    start += len(key)
    end = head.find(b"\n", start)
    value = head[start:] if end < 0 else head[start:end]
    return value.rstrip(b"\r").decode("utf-8", "replace")


def error_text(frame: bytes) -> str:
    """:returns: what an ERROR frame says: its ``message`` header, else the start of its body."""
    message = header_of(frame, "message")
    if message is not None:
        return message
    return frame.partition(b"\n\n")[2][:200].decode("utf-8", "replace")


class SendTemplate:
    """
    SEND frames to one destination, encoded but for the per-frame headers.

    :param destination: where to send.
    :param body: every frame's payload.
    :param extra_headers: headers every frame carries (e.g. ``persistent:true``).
    :param varying: a header whose value changes with the frame's ``seq``:
        ``(name, prefix, modulus)`` gives each frame ``name:PREFIX<seq % modulus>``
        (``JMSXGroupID:g17`` for 100 message groups, ``priority:3`` for mixed
        priorities); ``None`` for none.
    """

    __slots__ = ("_head", "_tail", "_receipt", "_varying")

    def __init__(
        self,
        destination: str,
        body: bytes,
        extra_headers: Iterable[tuple[str, str]] = (),
        varying: Varying | None = None,
    ) -> None:
        headers = [("destination", destination), *extra_headers]
        headers.append(("content-length", str(len(body))))
        self._head = ("SEND\n" + "".join(f"{n}:{v}\n" for n, v in headers) + "seq:").encode()
        self._tail = b"\n\n" + body + b"\x00"
        self._receipt = b"\nreceipt:r"
        self._varying: tuple[bytes, int] | None = None
        if varying is not None:
            name, prefix, modulus = varying
            self._varying = (f"\n{name}:{prefix}".encode(), modulus)

    def _seq(self, seq: int) -> bytes:
        """:returns: the ``seq`` value, and the varying header after it if there is one."""
        if self._varying is None:
            return b"%d" % seq
        header, modulus = self._varying
        return b"%d%s%d" % (seq, header, seq % modulus)

    def frames(self, seqs: range, receipt: bool) -> list[bytes]:
        """
        :param seqs: the sequence numbers, one frame each.
        :param receipt: whether the last frame asks for a receipt ``r<seq>``.
        :returns: the encoded frames.
        """
        head, tail = self._head, self._tail
        if self._varying is None:
            frames = [head + b"%d" % seq + tail for seq in seqs]
        else:
            frames = [head + self._seq(seq) + tail for seq in seqs]
        if receipt and frames:
            last = seqs[-1]
            frames[-1] = head + self._seq(last) + b"%s%d" % (self._receipt, last) + tail
        return frames

    def timed_frame(self, seq: int, now_ns: int, receipt: bool) -> bytes:
        """
        :param seq: the sequence number.
        :param now_ns: ``time.monotonic_ns()`` at the moment of writing, as ``ts``.
        :param receipt: whether to ask for a receipt ``r<seq>``.
        :returns: one encoded frame.
        """
        middle = self._seq(seq) + b"\nts:%d" % now_ns
        if receipt:
            middle += b"%s%d" % (self._receipt, seq)
        return self._head + middle + self._tail


class Inbox:
    """
    What one connection received: counts, a seen-map by ``seq``, and what the slow path found.

    :param version: the negotiated STOMP version, which decides the shape of ACKs.
    :param subscription_id: the subscription ACKs name (STOMP 1.1).
    :param ack_mode: ``auto``, ``client`` or ``client-individual``.
    :param warmup_seq: with ``timed``, frames below this ``seq`` are not timed.
    :param timed: record latencies from the ``ts`` header.
    :param ordered: messages come from one publisher, so they should arrive in
        ``seq`` order; whole chunks in order then take a fast path.

    :ivar received: MESSAGE frames that carried a ``seq``.
    :ivar duplicated: of those, how many had a ``seq`` already seen here.
    :ivar out_of_order: how many came after a higher ``seq`` (meaningful for one publisher).
    :ivar receipts: RECEIPT frames.
    :ivar foreign: MESSAGE frames without a ``seq``: not ours.
    :ivar error: the first ERROR frame's text, if one came.
    :ivar latencies: nanoseconds from ``ts`` to arrival, when ``timed``.
    """

    __slots__ = (
        "seen",
        "received",
        "duplicated",
        "out_of_order",
        "highest",
        "receipts",
        "foreign",
        "error",
        "latencies",
        "_warmup_seq",
        "_timed",
        "_ordered",
        "_ack_key",
        "_ack_prefix",
        "_ack_suffix",
        "_ack_mode",
        "_acks",
        "_rest",
    )

    def __init__(
        self,
        version: str = "1.2",
        subscription_id: str = "",
        ack_mode: str = "auto",
        warmup_seq: int = 0,
        timed: bool = False,
        ordered: bool = False,
    ) -> None:
        self.seen = bytearray(GROWTH)
        self.received = 0
        self.duplicated = 0
        self.out_of_order = 0
        self.highest = -1
        self.receipts = 0
        self.foreign = 0
        self.error: str | None = None
        self.latencies = array("q")
        self._warmup_seq = warmup_seq
        self._timed = timed
        # The fast path needs nothing but seq checks: no latencies, no ACKs.
        self._ordered = ordered and not timed and ack_mode == "auto"
        self._ack_mode = ack_mode
        self._acks: list[bytes] = []
        self._rest = b""
        if ack_mode == "auto":
            self._ack_key = b""
        elif version == "1.2":
            self._ack_key = b"\nack:"
        else:
            self._ack_key = b"\nmessage-id:"
        if version == "1.2":
            self._ack_prefix = b"ACK\nid:"
        elif version == "1.1":
            self._ack_prefix = b"ACK\nsubscription:" + subscription_id.encode() + b"\nmessage-id:"
        else:
            self._ack_prefix = b"ACK\nmessage-id:"
        self._ack_suffix = b"\n\n\x00"

    def receive(self, data: bytes, now_ns: int = 0) -> int:
        """
        Scan bytes from the broker.

        :param data: the decoded STOMP stream, in any chunks.
        :param now_ns: ``time.monotonic_ns()`` when ``data`` was read, for latencies.
        :returns: how many MESSAGE frames with a ``seq`` it held.
        """
        if self._rest:
            data = self._rest + data
        complete = data.rfind(b"\x00") + 1
        self._rest = data[complete:]
        if not complete:
            return 0
        if self._ordered:
            count = self._receive_run(data, complete)
            if count:
                return count
        return self._receive_frames(data, complete, now_ns)

    def _receive_run(self, data: bytes, complete: int) -> int:
        """
        The fast path for one publisher's messages arriving in order.

        When the chunk holds only MESSAGE frames whose ``seq`` values are exactly
        the next ones after the highest seen, every one is new: the whole chunk
        is checked and recorded by a few calls that loop in C.

        :returns: how many frames it took, or 0 when the chunk needs the frame-by-frame path.
        """
        seqs = SEQ_PATTERN.findall(data, 0, complete)
        count = len(seqs)
        first = self.highest + 1
        if (
            not count
            or data.count(b"\x00", 0, complete) != count
            or int(seqs[0]) != first
            or int(seqs[-1]) != first + count - 1
            or list(map(int, seqs)) != list(range(first, first + count))
        ):
            return 0
        seen = self.seen
        stop = first + count
        if stop > len(seen):
            seen.extend(bytes(max(GROWTH, stop - len(seen))))
        seen[first:stop] = b"\x01" * count
        self.highest = stop - 1
        self.received += count
        return count

    def _receive_frames(self, data: bytes, complete: int, now_ns: int) -> int:
        """The frame-by-frame path, for ``data[:complete]``, which ends with a NUL."""
        find = data.find
        seen = self.seen
        highest = self.highest
        timed = self._timed
        ack_key = self._ack_key
        count = 0
        position = 0
        while position < complete:
            end = find(b"\x00", position, complete)
            start = find(SEQ_KEY, position, end)
            if start < 0:
                self._other(data[position:end])
                position = end + 1
                continue
            start += 5
            seq = int(data[start : find(b"\n", start, end)])
            count += 1
            if seq < len(seen):
                if seen[seq]:
                    self.duplicated += 1
                else:
                    seen[seq] = 1
            else:
                seen.extend(bytes(max(GROWTH, seq + 1 - len(seen))))
                seen[seq] = 1
            if seq < highest:
                self.out_of_order += 1
            else:
                highest = seq
            if timed and seq >= self._warmup_seq:
                mark = find(TS_KEY, position, end) + 4
                self.latencies.append(now_ns - int(data[mark : find(b"\n", mark, end)]))
            if ack_key:
                mark = find(ack_key, position, end)
                if mark < 0:
                    self.error = (
                        self.error or "a MESSAGE to acknowledge has no ack/message-id header"
                    )
                else:
                    mark += len(ack_key)
                    self._acks.append(data[mark : find(b"\n", mark, end)])
            position = end + 1
        self.highest = highest
        self.received += count
        return count

    def _other(self, frame: bytes) -> None:
        frame = frame.lstrip(b"\r\n")
        command = command_of(frame)
        if command == b"RECEIPT":
            self.receipts += 1
        elif command == b"ERROR":
            if self.error is None:
                self.error = error_text(frame)
        elif command == b"MESSAGE":
            self.foreign += 1

    def take_acks(self) -> list[bytes]:
        """
        The ACK frames owed for what was received since the last call.

        ``client`` mode acknowledges cumulatively, so it owes one ACK for the
        last message; ``client-individual`` owes one per message (STOMP 1.2, "ACK").

        :returns: the encoded ACK frames; none in ``auto`` mode.
        """
        acks = self._acks
        if not acks:
            return acks
        self._acks = []
        prefix, suffix = self._ack_prefix, self._ack_suffix
        if self._ack_mode == "client":
            return [prefix + acks[-1] + suffix]
        return [prefix + token + suffix for token in acks]

    def unique(self) -> int:
        """:returns: how many distinct ``seq`` values arrived."""
        return self.seen.count(1)
