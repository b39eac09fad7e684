"""
Resumable sessions in the statistics: how many are connected and detached,
the bytes their resume buffers hold, and what became of the clients that came
back or did not (docs/resume.md, "Watching them").

The figures are this process's: a session is kept by the node its client was
connected to.  They are read from the broker's
:class:`~stompbroker.protocol.resume.resume_book.ResumeBook` when asked, so the
delivery path pays nothing for them beyond the byte count its buffer keeps anyway.
"""

from __future__ import annotations

from typing import Any

import attrs
from attrs import frozen

__all__ = ["ResumeFigures"]


@frozen
class ResumeFigures:
    """
    The broker's resumable sessions at one moment.

    :ivar connected: resumable sessions whose client is connected.
    :ivar detached: sessions waiting for their client (for ``--resume-window``).
    :ivar connected_bytes: bytes the connected ones keep of what they were sent lately.
    :ivar detached_bytes: bytes the detached ones hold for their clients.
    :ivar resumed: sessions resumed since the broker started (a counter).
    :ivar refused: resume tokens refused: unknown, expired, another login's or
        another protocol version's (a counter).
    :ivar expired: detached sessions whose window closed without their client (a counter).
    :ivar resumed_with_gap: resumes that said ``resume-gap:true`` (a counter).
    :ivar ended: detached sessions an operator ended (a counter).
    :ivar shed_frames: frames dropped early from resume buffers because memory
        was over ``--memory-high`` (a counter).
    """

    connected: int
    detached: int
    connected_bytes: int
    detached_bytes: int
    resumed: int
    refused: int
    expired: int
    resumed_with_gap: int
    ended: int
    shed_frames: int

    @classmethod
    def of(cls, book: Any) -> ResumeFigures:
        """
        :param book: the broker's
            :class:`~stompbroker.protocol.resume.resume_book.ResumeBook`.
        """
        return cls(
            connected=book.connected,
            detached=book.detached,
            connected_bytes=book.connected_bytes,
            detached_bytes=book.buffered_bytes,
            resumed=book.resumed,
            refused=book.refused,
            expired=book.expired,
            resumed_with_gap=book.gaps,
            ended=book.ended,
            shed_frames=book.shed_frames,
        )

    def to_dict(self) -> dict[str, int]:
        """:returns: the figures as the JSON object ``/stats`` shows."""
        return attrs.asdict(self)


def resume_figures(broker: Any) -> ResumeFigures | None:
    """:returns: the broker's resumable sessions now; ``None`` when it keeps none."""
    book = broker.resumption
    return None if book is None else ResumeFigures.of(book)
