"""
The switch of a shared queue from plain reading to deciding when its first
grouped message comes, with no moment in which a group's first messages could
reach their owner out of order.

While every consumer of a queue is plain and it never had a grouped message,
each node reads its stream for its own consumers.  The first grouped SEND (or
management move) marks the queue (:data:`~.lanes.MARK_GROUPED`, through the
ordered writer before the message's ``XADD``): field ``g`` of its mode hash,
and with it, once, field ``gs``, the *switch point*: the id of the stream's
newest entry then.  Every entry above it came after ``g``, so a node whose plain read gets
one learns of ``g`` in the ``HMGET`` pipelined after that read
(:mod:`.queue_reading`).

- A node says that it reads a queue the plain way, field ``r:NODE`` of the mode
  hash (a token new for each plain reading), before its first plain read
  (:meth:`GroupSwitch.before_read`), until it reads the plain way no more.
- The read in which a node first sees ``g`` hands out nothing above the switch
  point (:meth:`GroupSwitch.switched`): those entries stay pending for it in
  Redis, the node forgets them (and its reconciling leaves them alone:
  :attr:`GroupSwitch.left`), and its field becomes ``l`` (left), or goes when it
  left nothing.  A plain read of a queue with lanes is a script that reads
  nothing once ``g`` is set (:data:`~.lanes.READ_LANES`), so it leaves nothing.
- The deciding node, after each of its reads while any field ``r:`` remains,
  runs :data:`CLAIM_SWITCHED` (:meth:`GroupSwitch.claim`): it takes every entry
  above the switch point pending for a node with a field (``XCLAIM ...
  JUSTID``, which keeps the entry's delivery count: nobody delivered it) and
  removes the ``l`` fields, and decides those entries with what it read, in
  the stream's order.  An entry another node read before the decider's read is
  pending by then; one read after it has a higher id than anything decided so
  far, and the next batch takes it.  So each group's messages are decided in
  the order sent, as on one node.
"""

from __future__ import annotations

from itertools import count
from typing import Any

from stompbroker.broker.engine.redis.queue_sources import entry_order
from stompbroker.broker.engine.redis.scripts import load, run_script

__all__ = [
    "CLAIM_SWITCHED",
    "ENTER_PLAIN",
    "LEAVE_PLAIN",
    "GroupSwitch",
    "merge",
    "split",
]

#: lua/enter_plain.lua (what it takes and answers is said there).
ENTER_PLAIN = load("enter_plain")

#: lua/leave_plain.lua (what it takes and answers is said there).
LEAVE_PLAIN = load("leave_plain")

#: lua/claim_switched.lua (what it takes and answers is said there).
CLAIM_SWITCHED = load("claim_switched")


class GroupSwitch:
    """
    One queue's switch to deciding on this node: its plain reads' field, what
    its switching read left, and the decider's claims.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param dispatch: the queue's :class:`~.dispatch.ClusterDispatch`.

    :ivar entered: whether this node's field says it reads the plain way.
    :ivar claiming: whether, deciding, this node still looks for what plain
        readers left (until none is left: after ``g`` no node reads plain again).
    :ivar left: the ids of the entries this node's switching read left pending
        for the decider: its reconciling does not take them.
    """

    __slots__ = (
        "_engine",
        "_token",
        "_cleared",
        "_dispatch",
        "_field",
        "_reading",
        "_leaving",
        "entered",
        "claiming",
        "left",
    )

    def __init__(self, engine: Any, dispatch: Any) -> None:
        self._engine = engine
        self._dispatch = dispatch
        self._field = f"r:{engine.ids.node}"
        #: The token of this node's plain reading (:data:`ENTER_PLAIN`).
        self._token = ""
        #: Whether this handle, decided, made sure no plain reading of its node lingers.
        self._cleared = False
        #: Whether a plain read is under way: the field stays until it is done.
        self._reading = False
        #: Whether the field goes once the plain read under way is done.
        self._leaving = False
        self.entered = False
        self.claiming = True
        self.left: set[bytes] = set()

    async def before_read(self, take_modes: Any) -> bool:
        """
        :param take_modes: takes in the queue's modes, read with the field that
            says this node reads the plain way before its first plain read.
        :returns: whether this node's next read is plain.
        """
        dispatch = self._dispatch
        self._reading = not dispatch.active
        if self._reading and not self.entered:
            self._token = f"r{next(_TOKENS)}"
            modes = await run_script(
                self._engine.unretried, ENTER_PLAIN, 1, dispatch.mode, self._field, self._token
            )
            self.entered = True
            await take_modes(modes)
        if not dispatch.active:
            return True
        self._reading = False
        if self.entered:
            # Decided from its first read: it reads the plain way no more.
            self.leave()
        elif not self._cleared:
            # Decided from the start: no plain reading of this node's lingers.
            self._engine.writer.command("EVALSHA", LEAVE_PLAIN, 1, dispatch.mode, self._field, "*")
        self._cleared = True
        return False

    async def after_read(self, runs: list[tuple[str, list[Any]]], plain: bool) -> Any:
        """
        :param plain: whether the read was plain.
        :returns: the read; of a plain read after which the queue is decided,
            less what it left for the decider (:meth:`switched`); of the
            decider's, with what it took of what plain reads left (:meth:`claim`).
        """
        dispatch = self._dispatch
        if plain:
            self._reading = False
            if dispatch.active:
                return await self.switched(runs, dispatch.grouped)
            if self._leaving:
                self.leave()
            return runs
        if dispatch.grouped and dispatch.leading and self.claiming:
            return await self.claim(runs)
        return runs

    def leave_soon(self) -> None:
        """This node's last consumer left: it reads no more, once the read under way is done."""
        if self._reading:
            self._leaving = True
        else:
            self.leave()

    def leave(self, left: bool = False) -> None:
        """This node reads the plain way no more (through the ordered writer)."""
        self.entered = self._leaving = False
        mode = self._dispatch.mode
        state = "l" if left else self._token
        self._engine.writer.command("EVALSHA", LEAVE_PLAIN, 1, mode, self._field, state)

    async def switched(self, runs: list[tuple[str, list[Any]]], grouped: bool) -> Any:
        """
        A plain read after which the queue is decided: of a grouped queue, the
        entries above the switch point stay pending for the decider.

        :returns: the rest of the read, to decide as any other.
        """
        dispatch = self._dispatch
        left: list[bytes] = []
        if grouped:
            since = await self._engine.unretried.hget(dispatch.mode, "gs")
            if since is not None:
                runs, left = split(runs, dispatch.stream, entry_order(since))
        self.left.update(left)
        self.leave(bool(left))
        return runs

    async def claim(self, runs: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
        """
        Deciding: take what plain readers left above the switch point
        (:data:`CLAIM_SWITCHED`), after this node's read.

        :returns: the read with those entries in the queue stream's run, in id order.
        """
        dispatch = self._dispatch
        engine = self._engine
        plain, found = await run_script(
            engine.unretried,
            CLAIM_SWITCHED,
            3,
            dispatch.mode,
            dispatch.lease,
            dispatch.stream,
            engine.names.group,
            engine.ids.node,
            *self.left,
        )
        if int(plain) == 0:
            self.claiming = False
        claimed = {found[i]: _fields(found[i + 1]) for i in range(0, len(found), 2)}
        if not claimed:
            return runs
        self.left.difference_update(claimed)
        return merge(runs, dispatch.stream, claimed)


#: Numbers the tokens of this node's plain readings, across its queues.
_TOKENS = count(1)


def split(
    runs: list[tuple[str, list[Any]]], stream: str, since: tuple[int, int]
) -> tuple[list[tuple[str, list[Any]]], list[bytes]]:
    """
    :returns: the runs without ``stream``'s entries above ``since``, and those
        entries' ids.
    """
    kept: list[tuple[str, list[Any]]] = []
    left: list[bytes] = []
    for name, entries in runs:
        if name == stream:
            left += [entry[0] for entry in entries if entry_order(entry[0]) > since]
            entries = [entry for entry in entries if entry_order(entry[0]) <= since]
        kept.append((name, entries))
    return kept, left


def merge(
    runs: list[tuple[str, list[Any]]], stream: str, claimed: dict[Any, dict[bytes, Any]]
) -> list[tuple[str, list[Any]]]:
    """
    :returns: the runs with the ``claimed`` entries of ``stream`` among its read
        ones (an entry read and claimed once), in id order; a run of their own
        at the end when the read had none of ``stream``.
    """
    for index, (name, entries) in enumerate(runs):
        if name == stream:
            both = {**claimed, **dict(entries)}
            merged = sorted(both.items(), key=lambda entry: entry_order(entry[0]))
            return [*runs[:index], (name, merged), *runs[index + 1 :]]
    return [*runs, (stream, sorted(claimed.items(), key=lambda entry: entry_order(entry[0])))]


def _fields(flat: Any) -> dict[bytes, Any]:
    """:returns: a stream entry's flat field list as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))
