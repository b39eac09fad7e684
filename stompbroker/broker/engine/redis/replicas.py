"""
Writes the primary took whose ``WAIT`` found fewer replicas than
``--engine-wait-replicas`` asks (a failover, or a new primary whose replica
has not synchronised yet): the writer holds them, with the RECEIPTs that wait
for them, instead of failing them at once.

Two things can happen to a held write:

- a later ``WAIT`` over the **same connection** reaches enough replicas: it
  covers every earlier write of that connection (Redis counts a client's
  writes by their replication offset), so the held writes are confirmed and
  their RECEIPTs go out;
- the connection changes (lost, or dropped because the primary moved): the
  write may be on a server that is no replica of the new primary any more,
  so it is sent again, marked as redelivered, and waited for anew.

Past ``--engine-outage-hold`` the RECEIPTs become ERROR ``message not replicated``.

Pure bookkeeping: the :class:`~stompbroker.broker.engine.redis.writer.Writer` sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from stompbroker.broker.engine.redis.codec import mark_resent
from stompbroker.broker.engine.redis.outage import RedisUnreachable

__all__ = [
    "PRIMARY_ONLY",
    "Durability",
    "HeldWrite",
    "HeldWrites",
    "NotReplicated",
    "ReplicaWait",
    "expired_text",
    "resent",
    "short_text",
]


@frozen
class Durability:
    """
    What a RECEIPT of a persistent SEND waits for (``--engine-wait-replicas``,
    ``--engine-wait-timeout``).

    :ivar replicas: how many replicas must have the write (Redis's ``WAIT``);
        0: the primary's answer is enough.
    :ivar timeout: seconds ``WAIT`` waits for them.
    """

    replicas: int = 0
    timeout: float = 1.0


#: The default: a RECEIPT waits for the primary only.
PRIMARY_ONLY = Durability()


@frozen
class HeldWrite:
    """
    One command of a pipeline whose ``WAIT`` came back short.

    :ivar command: its arguments, to send again if the connection changes.
    :ivar waiter: the Deferred of the RECEIPT that waits for it, if any.
    :ivar reply: what the primary answered it, for the waiter once confirmed.
    """

    command: Sequence[Any]
    waiter: Any
    reply: Any


class HeldWrites:
    """
    The held writes, oldest first, and the connection they went over.

    :ivar connection: the writer's connection count (``Connects.count``) when
        they were sent, or ``None`` while none is held.
    """

    def __init__(self) -> None:
        self._writes: list[HeldWrite] = []
        self.connection: int | None = None

    def __bool__(self) -> bool:
        return bool(self._writes)

    def __len__(self) -> int:
        return len(self._writes)

    def add(self, writes: list[HeldWrite], connection: int | None) -> None:
        """Hold ``writes``, sent over ``connection`` (the same as those held already)."""
        if not self._writes:
            self.connection = connection
        self._writes.extend(writes)

    def take(self) -> list[HeldWrite]:
        """:returns: every held write, oldest first, and holds none any more."""
        writes, self._writes = self._writes, []
        self.connection = None
        return writes

    def waiters(self) -> int:
        """:returns: how many RECEIPTs wait for the held writes."""
        return sum(1 for write in self._writes if write.waiter is not None)

    def held_bytes(self) -> int:
        """:returns: about how many bytes the held commands take."""
        return sum(
            64 + sum(len(arg) for arg in write.command if isinstance(arg, bytes))
            for write in self._writes
        )


class ReplicaWait:
    """
    A writer's part for ``--engine-wait-replicas``: which waiters wait for the
    replicas, and the writes held while the replicas lack them.

    :param durability: what a RECEIPT waits for.
    :param connects: the count of the writer's connections (``Connects``), or
        ``None`` (then one connection is assumed).
    :ivar held: the writes a ``WAIT`` found short, with their waiters.
    """

    def __init__(self, durability: Durability, connects: Any = None) -> None:
        self.durability = durability
        self.held = HeldWrites()
        self._connects = connects
        self._waiting: set[Any] = set()

    def add(self, waiter: Any) -> None:
        """``waiter`` fires only once the replicas have its write (if any are asked for)."""
        if self.durability.replicas:
            self._waiting.add(waiter)

    def __contains__(self, waiter: Any) -> bool:
        return waiter in self._waiting

    def discard(self, waiter: Any) -> None:
        """``waiter`` fired (or failed): forget it."""
        self._waiting.discard(waiter)

    def asked(self, waiters: Sequence[tuple[int, Any]]) -> bool:
        """:returns: whether a pipeline with these ``(index, waiter)`` must end with ``WAIT``."""
        return any(waiter in self._waiting for _, waiter in waiters)

    def connection(self) -> int | None:
        """:returns: the writer's connection count now."""
        return None if self._connects is None else int(self._connects.count)

    def moved_on(self) -> bool:
        """:returns: whether writes are held that went over another connection than now."""
        return (
            bool(self.held)
            and self._connects is not None
            and (self._connects.count != self.held.connection)
        )

    def short(self, reply: Any) -> str | None:
        """:returns: why ``WAIT``'s ``reply`` is short of replicas, or ``None`` if it is not."""
        if isinstance(reply, int) and reply >= self.durability.replicas:
            return None
        return short_text(self.durability, reply)

    def hold(
        self,
        commands: Sequence[Sequence[Any]],
        waiters: Sequence[tuple[int, Any]],
        replies: Sequence[Any],
        keep: Any,
    ) -> None:
        """Hold a short pipeline's commands that ``keep(args)`` says are writes to hold."""
        waiting = {
            index: waiter
            for index, waiter in waiters
            if waiter in self._waiting and not isinstance(replies[index], Exception)
        }
        self.held.add(
            [
                HeldWrite(args, waiting.get(index), replies[index])
                for index, args in enumerate(commands)
                if keep(args)
            ],
            self.connection(),
        )

    def confirm(self) -> None:
        """A ``WAIT`` over the held writes' connection reached enough replicas: they are in."""
        for write in self.held.take():
            if write.waiter is not None:
                self._waiting.discard(write.waiter)
                write.waiter.callback(write.reply)

    def resend(self) -> tuple[list[Sequence[Any]], list[tuple[int, Any]]]:
        """
        :returns: the held writes as commands to send again (marked), and their
            waiters by index among them; none is held any more.
        """
        held = self.held.take()
        commands = [resent(write.command) for write in held]
        return commands, [(index, write.waiter) for index, write in enumerate(held) if write.waiter]

    def fail(self, error: Exception) -> None:
        """The hold ran out: every held waiter gets ``error``; the writes are no longer tracked."""
        for write in self.held.take():
            if write.waiter is not None:
                self._waiting.discard(write.waiter)
                write.waiter.errback(error)


def short_text(durability: Durability, reply: Any) -> str:
    """:returns: why a RECEIPT is an ERROR when a ``WAIT`` answered ``reply`` (hold 0)."""
    said = f"Redis answered {reply}" if isinstance(reply, Exception) else f"{reply} did"
    return (
        f"the message is stored on the broker's Redis primary, but {durability.replicas} of"
        f" its replicas did not confirm it within {durability.timeout:g} s ({said};"
        " --engine-wait-replicas): a failover may lose it"
    )


def expired_text(durability: Durability, lasted: float) -> str:
    """:returns: why a held RECEIPT became an ERROR after ``lasted`` seconds."""
    return (
        f"the message is stored on the broker's Redis primary, but {durability.replicas} of"
        f" its replicas have not confirmed it for {lasted:.0f} s (longer than"
        " --engine-outage-hold): a failover may lose it"
    )


class _Resent(tuple):
    """A command sent once already: marked once, however often it is sent again."""

    __slots__ = ()


def resent(args: Sequence[Any]) -> Sequence[Any]:
    """
    :returns: a command to send again after its connection died: a message's
        ``XADD`` with the message marked as redelivered, once; others as they are.
    """
    if isinstance(args, _Resent) or not isinstance(args, tuple):
        return args
    if len(args) == 5 and args[0] == "XADD" and args[3] == "m":
        return _Resent((*args[:4], mark_resent(args[4])))
    return _Resent(args)


class NotReplicated(RedisUnreachable):
    """
    A receipted write reached the primary, but fewer replicas than
    ``--engine-wait-replicas`` confirmed it within ``--engine-wait-timeout``:
    the client gets an ERROR (the message is stored, and may be lost on failover).
    """
