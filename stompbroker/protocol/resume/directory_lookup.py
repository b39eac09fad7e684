"""
Resuming a session in a cluster: before CONNECTED, the session asks the
cluster's directory (the engine's
:class:`~stompbroker.interfaces.IResumeDirectory`) about the token CONNECT
presented, the client's frames held and its socket not read meanwhile, as
while a password is checked.  A session kept here is then claimed as on one
node (:mod:`.part`); one kept by a dead node is made again from its record,
with ``resume-gap:true``; one kept by another live node is subscribed again
to its topics (their messages held), then handed over by that node (the
frames missed, the subscriptions' latest headers), and written, the held
frames the handover also carried left out (:mod:`.records`;
docs/cluster.md, "Resuming a session on another node").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attrs import frozen

from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import Failing, StateView
from stompbroker.protocol.resume.session_records import (
    Elsewhere,
    Handover,
    Taken,
    frame_identity,
    subscription_id,
    token_key,
)
from stompbroker.protocol.states import State

if TYPE_CHECKING:
    from stompbroker.protocol.resume.part import Resume
    from stompbroker.protocol.resume.resume_book import ResumeBook
    from stompbroker.protocol.subscriptions import Subscriptions

#: What the directory said of a presented token: nothing is kept.
NOWHERE = "nowhere"
#: ... the session is this node's: claim it from the book as on one node.
HERE = "here"


@frozen
class Waiting:
    """
    How a session waits for an answer before CONNECTED (the cluster's, as
    for a login's): the session's own steps, which a lookup calls.

    :ivar start: the wait begins: hold the client's frames, read nothing more.
    :ivar keep: keep the answer awaited (``None``: it came), to cancel it if
        the client goes.
    :ivar let_in: the answer is in: CONNECTED, then the frames that waited.
    """

    start: Callable[[], None]
    keep: Callable[[Any], None]
    let_in: Callable[[], None]


class DirectoryLookup:
    """
    A resumable session's questions to the cluster's directory, and taking up
    a session another node kept.  Held by the session's
    :class:`~stompbroker.protocol.resume.part.Resume`.

    :param resume: the part it answers for (its token, and the frames written).
    :param book: the broker's resumable sessions, or ``None``.
    :param life: the session's state, read.
    :param subscriptions: the session's subscriptions, made for a handover.
    :param fail: ends the session with an ERROR.
    :param waiting: how the session waits for the directory's answer.
    """

    __slots__ = ("found", "_book", "_fail", "_life", "_resume", "_subscriptions", "_waiting")

    def __init__(
        self,
        resume: Resume,
        book: ResumeBook | None,
        life: StateView,
        subscriptions: Subscriptions,
        fail: Failing,
        waiting: Waiting,
    ) -> None:
        self._resume = resume
        self._book = book
        self._life = life
        self._subscriptions = subscriptions
        self._fail = fail
        self._waiting = waiting
        #: What the directory said of the presented token (``None``: not
        #: asked): :data:`NOWHERE`, :data:`HERE` or an :class:`Elsewhere`.
        self.found: Any = None

    def take_found(self) -> Any:
        """:returns: what the directory said (see :attr:`found`), forgotten from now."""
        found, self.found = self.found, None
        return found

    def wait(self) -> bool:
        """
        Before CONNECTED: ask the cluster's directory about the presented token.

        :returns: ``True`` when the session now waits for the answer (its
            client's frames held, its socket not read, as while a login is
            checked); ``waiting.let_in`` follows the answer.
        """
        book = self._book
        resume = self._resume
        if (
            not resume.resume_token
            or book is None
            or book.directory is None
            or self.found is not None
            or not book.directory.available()
        ):
            return False
        if self._life.state is State.AWAITING_CONNECT:
            self._waiting.start()
        taking = book.directory.take(
            token_key(resume.resume_token),
            resume.login_name(),
            resume.version,
        )
        self._await(taking, self._taken)
        return True

    def _await(self, answer: Any, then: Callable[[Any], None]) -> None:
        """Wait for the directory's ``answer`` (cancelled, as a login is, if the client goes)."""
        self._waiting.keep(answer)
        answer.addCallbacks(self._answered, self._not_answered, callbackArgs=(then,))

    def _answered(self, result: Any, then: Callable[[Any], None]) -> None:
        self._waiting.keep(None)
        if self._life.state is State.AUTHENTICATING:
            then(result)

    def _not_answered(self, failure: Any) -> None:
        """The directory could not answer (its server went): resume here if we can."""
        self._waiting.keep(None)
        if self._life.state is State.AUTHENTICATING:
            self.found = HERE
            self._waiting.let_in()

    def _taken(self, taken: Taken | None) -> None:
        if taken is None:
            self.found = NOWHERE
        elif taken.here:
            self.found = HERE
        elif not taken.alive:
            self.found = Elsewhere(taken.record.subscriptions)
        else:
            self._hand_over(taken)
            return
        self._waiting.let_in()

    def _hand_over(self, taken: Taken) -> None:
        """
        The session is another live node's: subscribe again to its topics,
        holding what they get, then ask that node for the session.  The new
        subscriptions are in place before the old ones go, and the request
        goes after every message published here before them, so none falls
        between (docs/cluster.md).
        """
        book: Any = self._book
        made: dict[str, tuple[Any, list[bytes]]] = {}
        try:
            for headers in taken.record.subscriptions:
                subscription = self._subscriptions.new(Frame("SUBSCRIBE", tuple(headers.items())))
                if not subscription.collects_while_detached:
                    continue
                held: list[bytes] = []
                subscription.divert(held.append)
                self._subscriptions.add(subscription)
                made[subscription.subscription_id] = (subscription, held)
        except ProtocolError:
            # Refused here (access rights, say): CONNECTED answers as from the
            # record, and resume_elsewhere fails as a resume on one node does.
            for subscription, _ in made.values():
                self._unmake(subscription)
            # The keeping node lets go of its copy too: nobody can claim it now.
            book.directory.hand_over(taken.node, token_key(str(self._resume.resume_token)), None)
            self.found = Elsewhere(taken.record.subscriptions)
            self._waiting.let_in()
            return
        key = token_key(str(self._resume.resume_token))
        asked = book.directory.hand_over(taken.node, key, self._resume.last)
        self._await(asked, lambda handover: self._handed_over(taken, made, handover))

    def _handed_over(
        self, taken: Taken, made: dict[str, tuple[Any, list[bytes]]], handover: Handover | None
    ) -> None:
        if handover is None:
            # The node did not answer in time, or no longer had the session:
            # what it held is lost to the client, which is told so.
            self.found = Elsewhere(taken.record.subscriptions, made=made)
        else:
            self.found = Elsewhere(handover.subscriptions, handover.frames, handover.gap, made)
        self._waiting.let_in()

    def resume_elsewhere(self, elsewhere: Elsewhere) -> None:
        """
        Take up a session from another node: the subscriptions not made yet,
        what it missed, then what the topics' subscriptions held that it did not
        carry, then the live flow.
        """
        made = elsewhere.made
        releases = []
        wanted = set()
        try:
            for headers in elsewhere.subscriptions:
                name = subscription_id(headers)
                wanted.add(name)
                if name in made:
                    continue
                subscription = self._subscriptions.new(Frame("SUBSCRIBE", tuple(headers.items())))
                releases.append(subscription.hold_writes())
                self._subscriptions.add(subscription)
        except ProtocolError as error:
            self._fail(error)
            return
        frames = list(elsewhere.frames)
        # Read the handover's frames for their ids only when something was held.
        seen = set()
        if any(held for _, held in made.values()):
            seen = {frame_identity(data) for data in frames}
        for name, (subscription, held) in made.items():
            if name not in wanted:
                # Unsubscribed on the old node after its record was filed.
                self._unmake(subscription)
                continue
            subscription.divert(self._resume.write_recent)
            frames.extend(data for data in held if frame_identity(data) not in seen)
        self._resume.write_replayed(frames)
        for release in releases:
            release()

    def _unmake(self, subscription: Any) -> None:
        """Give back a subscription made for a resume that did not need it."""
        self._subscriptions.discard(subscription)
