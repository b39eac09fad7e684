"""
Append stats records to hourly JSON Lines files that Spark can follow safely.

Layout of the stats directory (all names in UTC)::

    stats-2024050111.jsonl              complete: the records of 11:00-11:59
    stats-2024050112.jsonl              complete: 12:00 until the broker stopped
    stats-2024050112-1.jsonl            complete: the rest of 12:00-12:59, after a restart
    .stats-2024050113.jsonl.inprogress  being written now

Records are appended to a hidden in-progress file, which Spark's file sources
skip (they ignore names starting with ``.`` or ``_``), and the file is renamed
to its final name, which matches :data:`stompbroker.stats.schema.FILE_GLOB`,
when the hour rolls over or the exporter closes.  A rename within one
directory is atomic, so a reader sees either no file or the whole file, never
half of one.  A final name is never reused (Spark's streaming source would
take a second file of the same name for one it has already read), hence the
``-N`` suffix when the broker restarts within an hour.

If the process dies, the in-progress file stays behind.  The next exporter in
that directory publishes it if its hour is over, or keeps appending to it if
not; a record cut short by the crash is left as a bad line, which the Spark
jobs count and skip.

One exporter writes to a directory at a time.

The exporter does blocking file I/O on the caller's thread.  That is meant:
a write is one ``write`` + ``flush`` of a few hundred bytes per destination
per interval (a few KB for a typical broker), which the page cache absorbs in
microseconds; ``fsync`` happens only at the hourly rename.  The reactor can
afford that; it could not afford a thread hop per record.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from attrs import define, field

from stompbroker.stats.schema import FILE_PREFIX, FILE_SUFFIX, StatsRecord, record_to_json_line

IN_PROGRESS_PREFIX = "."
IN_PROGRESS_SUFFIX = ".inprogress"


class ExportDirectoryError(Exception):
    """The stats directory cannot be made or written; the message says which and why."""


def hour_stamp(seconds: float) -> str:
    """
    :param seconds: seconds since the epoch.
    :returns: the UTC hour they fall in, as ``YYYYMMDDHH``.
    """
    return time.strftime("%Y%m%d%H", time.gmtime(seconds))


def in_progress_name(hour: str) -> str:
    """:returns: the hidden name of the file that collects ``hour``'s records."""
    return f"{IN_PROGRESS_PREFIX}{FILE_PREFIX}{hour}{FILE_SUFFIX}{IN_PROGRESS_SUFFIX}"


def final_name(hour: str, part: int = 0) -> str:
    """
    :param hour: ``YYYYMMDDHH``.
    :param part: 0 for the first file of the hour, then 1, 2, ... after restarts.
    :returns: the published file name.
    """
    suffix = f"-{part}" if part else ""
    return f"{FILE_PREFIX}{hour}{suffix}{FILE_SUFFIX}"


@define
class StatsExporter:
    """
    Appends stats records to the current hour's file in ``directory``.

    Call :meth:`write` once per interval, :meth:`roll` from a timer if writes
    may pause across an hour boundary, and :meth:`close` on shutdown.

    :ivar directory: where the files go; created on the first write.
    :ivar clock: returns the current time in epoch seconds (``reactor.seconds``
        in the broker, a fake in tests); it decides which hour a write belongs to.
    """

    directory: Path = field(converter=Path)
    clock: Callable[[], float] = time.time
    _file: BinaryIO | None = field(default=None, init=False)
    _hour: str | None = field(default=None, init=False)
    _recovered: bool = field(default=False, init=False)

    def check(self) -> None:
        """
        Make the directory if need be and write a file in it, so that a directory the
        broker cannot use stops it at start rather than fails every interval after.

        :raises ExportDirectoryError: saying what is wrong and what to do.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.directory):
                pass
        except OSError as error:
            raise ExportDirectoryError(
                f"cannot use {self.directory} as the stats directory:"
                f" {error.strerror or error}; make it a directory the broker's user can"
                " write, or choose another (--stats-dir)"
            ) from None

    def write(self, records: Iterable[StatsRecord]) -> int:
        """
        Append records, one JSON line each, to the file of the current hour.

        Publishes the previous hour's file first if the hour has rolled over.

        :param records: the records of one interval.
        :returns: how many records were written.
        :raises OSError: when the directory or file cannot be written.
        """
        lines = [record_to_json_line(record).encode("utf-8") + b"\n" for record in records]
        if not lines:
            return 0
        output = self._open(hour_stamp(self.clock()))
        output.write(b"".join(lines))
        output.flush()
        return len(lines)

    def roll(self) -> Path | None:
        """
        Publish the open file if its hour is over.

        :returns: the published path, or ``None`` if nothing was due.
        :raises OSError: when the rename fails.
        """
        if self._hour is None or self._hour == hour_stamp(self.clock()):
            return None
        return self._publish_open_file()

    def close(self) -> Path | None:
        """
        Publish the open file, whatever its hour.  A later :meth:`write` starts a new part.

        :returns: the published path, or ``None`` if no file was open.
        :raises OSError: when the rename fails.
        """
        if self._hour is None:
            return None
        return self._publish_open_file()

    @property
    def in_progress_path(self) -> Path | None:
        """The file being appended to, or ``None``."""
        return None if self._hour is None else self.directory / in_progress_name(self._hour)

    def _open(self, hour: str) -> BinaryIO:
        if self._file is not None and self._hour == hour:
            return self._file
        if self._hour is not None:
            self._publish_open_file()
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self._recovered:
            self._publish_leftovers(current_hour=hour)
            self._recovered = True
        path = self.directory / in_progress_name(hour)
        output = path.open("ab")
        if output.tell() and not _ends_with_newline(path):
            # A crash cut the last line short: end it, so it spoils only itself.
            output.write(b"\n")
        self._file, self._hour = output, hour
        return output

    def _publish_open_file(self) -> Path | None:
        assert self._file is not None and self._hour is not None
        output, hour = self._file, self._hour
        self._file = self._hour = None
        output.flush()
        os.fsync(output.fileno())
        output.close()
        return self._publish(self.directory / in_progress_name(hour), hour)

    def _publish_leftovers(self, current_hour: str) -> None:
        """Publish the in-progress files a dead process left for hours that are over."""
        prefix = IN_PROGRESS_PREFIX + FILE_PREFIX
        for path in sorted(self.directory.glob(f"{prefix}*{FILE_SUFFIX}{IN_PROGRESS_SUFFIX}")):
            hour = path.name[len(prefix) :].split(".", 1)[0]
            if hour != current_hour:
                self._publish(path, hour)

    def _publish(self, path: Path, hour: str) -> Path | None:
        if path.stat().st_size == 0:
            path.unlink()
            return None
        part = 0
        while (self.directory / final_name(hour, part)).exists():
            part += 1
        target = self.directory / final_name(hour, part)
        os.rename(path, target)
        return target


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as existing:
        existing.seek(-1, os.SEEK_END)
        return existing.read(1) == b"\n"
