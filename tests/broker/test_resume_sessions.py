"""
Resumable sessions on a real in-process broker, without sockets
(stompbroker.protocol.resume.part over stompbroker.protocol.resume.resume_book): a session
that drops comes back with its subscriptions and what it missed.
"""

from __future__ import annotations

from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.protocol.session import SessionConfig
from tests.support.broker import Client, World


def world(window: float = 120, buffer: int = 1024 * 1024, **settings: object) -> World:
    """:returns: a broker world whose sessions are resumable."""
    made = World()
    made.config = SessionConfig(
        heartbeat=(0, 0),
        resumption=ResumeBook(made.clock, window, buffer),
        **settings,  # type: ignore[arg-type]
    )
    return made


def publish(world: World, destination: str, *bodies: str) -> None:
    for body in bodies:
        world.broker.publish(destination, body)


def bodies(client: Client) -> list[bytes]:
    return [frame.body for frame in client.messages()]


def test_a_resumed_session_gets_what_it_missed_in_order_then_the_live_flow() -> None:
    """Missed topic messages come first, in order, on the same subscription id; live ones follow."""
    here = world()
    first = here.client(resume_token="")
    token = first.connected.get("resume-token")
    assert token and first.connected.get("resumed") == "false"
    first.send_frame("SUBSCRIBE", id="news", destination="/topic/news")
    publish(here, "/topic/news", "m1")
    assert bodies(first) == [b"m1"]
    first.session.connection_lost()
    publish(here, "/topic/news", "m2", "m3")
    again = here.client(resume_token=token)
    assert again.connected.get("resumed") == "true"
    assert again.connected.get("resume-gap") is None
    assert again.connected.get("resume-token") not in (None, token)
    assert [f.body for f in again.early] == [b"m2", b"m3"]
    assert {f.get("subscription") for f in again.early} == {"news"}
    publish(here, "/topic/news", "m4")
    assert bodies(again) == [b"m4"]


def test_a_client_that_did_not_ask_gets_no_token_and_its_session_ends_with_the_connection() -> None:
    """Without resume-token on CONNECT nothing is kept: plain clients cost nothing."""
    here = world()
    plain = here.client()
    assert plain.connected.get("resume-token") is None and plain.connected.get("resumed") is None
    plain.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    plain.session.connection_lost()
    assert here.config is not None and here.config.resumption.detached == 0
    assert not here.broker.engine.topics.match("/topic/t")


def test_a_wrong_token_starts_a_fresh_session_and_says_so() -> None:
    """An unknown token gets resumed:false, a new token and no subscriptions."""
    here = world()
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    first.session.connection_lost()
    stranger = here.client(resume_token="not-a-token")
    assert stranger.connected.get("resumed") == "false"
    assert stranger.connected.get("resume-token")
    publish(here, "/topic/t", "m")
    assert stranger.frames() == []


def test_another_users_token_is_refused_as_if_wrong() -> None:
    """A token is good only for the login it was issued to."""
    here = world()
    first = here.client(resume_token="", login="ann")
    first.session.connection_lost()
    token = first.connected.get("resume-token") or ""
    # Without an authenticator every login is anonymous: the identity check is
    # the book's (tested there); here the same login resumes.
    assert here.client(resume_token=token).connected.get("resumed") == "true"


def test_past_the_window_the_session_is_gone_and_its_subscriptions_with_it() -> None:
    """After --resume-window the kept subscriptions leave the broker and the token is void."""
    here = world(window=10)
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    first.session.connection_lost()
    assert len(here.broker.engine.topics.match("/topic/t")) == 1
    here.clock.advance(10)
    assert not here.broker.engine.topics.match("/topic/t")
    late = here.client(resume_token=first.connected.get("resume-token") or "")
    assert late.connected.get("resumed") == "false"


def test_an_overflowing_buffer_is_told_as_a_gap() -> None:
    """Past --resume-buffer the oldest missed messages go and CONNECTED says resume-gap:true."""
    here = world(buffer=400)
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    first.session.connection_lost()
    publish(here, "/topic/t", *(f"m{n}" for n in range(20)))
    again = here.client(resume_token=first.connected.get("resume-token") or "")
    assert again.connected.get("resumed") == "true"
    assert again.connected.get("resume-gap") == "true"
    kept = [f.body for f in again.early]
    assert kept and kept[-1] == b"m19" and len(kept) < 20


def test_queue_messages_go_back_at_once_and_are_redelivered_on_resume() -> None:
    """A detached consumer holds nothing hostage; back, it gets what is left, marked redelivered."""
    here = world()
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="q", destination="/queue/jobs", ack="client-individual")
    publish(here, "/queue/jobs", "j1", "j2")
    assert bodies(first) == [b"j1", b"j2"]
    first.session.connection_lost()
    queue = here.broker.engine.queues["/queue/jobs"]
    assert len(queue.pending) == 2 and not queue.consumers
    again = here.client(resume_token=first.connected.get("resume-token") or "")
    redelivered = again.early
    assert [f.body for f in redelivered] == [b"j1", b"j2"]
    assert all(f.get("redelivered") == "true" and f.get("subscription") == "q" for f in redelivered)
    again.ack(redelivered[0])
    again.ack(redelivered[1])
    assert len(queue.pending) == 0


def test_open_transactions_are_aborted_on_detach() -> None:
    """A transaction open when the connection dropped is aborted: its SENDs never go out."""
    here = world()
    first = here.client(resume_token="")
    first.send_frame("BEGIN", transaction="tx")
    first.send_frame("SEND", destination="/queue/out", transaction="tx")
    first.session.connection_lost()
    again = here.client(resume_token=first.connected.get("resume-token") or "")
    again.send_frame("COMMIT", transaction="tx", receipt="r")
    [error] = again.frames()
    assert error.command == "ERROR"
    queues = here.broker.engine.queues
    assert "/queue/out" not in queues or not queues["/queue/out"].pending


def test_a_heartbeat_timeout_detaches_the_session() -> None:
    """A client silent past its heart-beat (the train in the tunnel) may resume."""
    here = World()
    here.config = SessionConfig(heartbeat=(1000, 1000), resumption=ResumeBook(here.clock))
    first = here.client(resume_token="", heart_beat="1000,1000")
    first.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    here.clock.advance(5)
    assert first.closed
    first.session.connection_lost()
    publish(here, "/topic/t", "missed")
    again = here.client(resume_token=first.connected.get("resume-token") or "")
    assert again.connected.get("resumed") == "true"
    assert [f.body for f in again.early] == [b"missed"]


def test_resuming_a_session_that_still_looks_connected_takes_it_over() -> None:
    """The old connection is closed and its session resumed, nothing delivered twice."""
    here = world()
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="s", destination="/topic/t")
    again = here.client(resume_token=first.connected.get("resume-token") or "")
    assert first.closed and again.connected.get("resumed") == "true"
    first.session.connection_lost()
    publish(here, "/topic/t", "once")
    assert bodies(again) == [b"once"]
    assert first.frames() == []


def test_a_disconnect_voids_the_token() -> None:
    """A client that said goodbye has no session to come back to."""
    here = world()
    first = here.client(resume_token="")
    first.send_frame("DISCONNECT")
    first.session.connection_lost()
    again = here.client(resume_token=first.connected.get("resume-token") or "")
    assert again.connected.get("resumed") == "false"


def test_messages_a_dead_network_swallowed_are_sent_again_after_the_clients_last() -> None:
    """Written before the broker noticed, lost on the way: the client's last id brings them back."""
    here = world()
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="news", destination="/topic/news")
    publish(here, "/topic/news", "m1", "m2", "m3", "m4")
    written = first.messages()
    # The client got m1 and m2; m3 and m4 were in the socket when the network died.
    got = written[1]
    first.session.connection_lost()
    publish(here, "/topic/news", "m5")
    again = here.client(
        resume_token=first.connected.get("resume-token") or "",
        resume_last_subscription="news",
        resume_last_message_id=got.get("message-id") or "",
    )
    assert again.connected.get("resume-gap") is None
    assert [f.body for f in again.early] == [b"m3", b"m4", b"m5"]


def test_a_client_whose_last_message_is_no_longer_kept_is_told_of_a_gap() -> None:
    """When the buffer dropped what followed the client's last message, resume-gap:true says so."""
    here = world(buffer=600)
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="news", destination="/topic/news")
    publish(here, "/topic/news", "m0")
    oldest = first.messages()[0]
    publish(here, "/topic/news", *(f"m{n}" for n in range(1, 20)))
    first.session.connection_lost()
    again = here.client(
        resume_token=first.connected.get("resume-token") or "",
        resume_last_subscription="news",
        resume_last_message_id=oldest.get("message-id") or "",
    )
    assert again.connected.get("resume-gap") == "true"


def test_a_resumed_session_is_itself_resumable_and_keeps_the_replayed_messages() -> None:
    """Dropping again during or after a resume loses nothing either: the token chain goes on."""
    here = world()
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="news", destination="/topic/news")
    first.session.connection_lost()
    publish(here, "/topic/news", "m1", "m2")
    second = here.client(resume_token=first.connected.get("resume-token") or "")
    assert [f.body for f in second.early] == [b"m1", b"m2"]
    second.session.connection_lost()
    publish(here, "/topic/news", "m3")
    third = here.client(
        resume_token=second.connected.get("resume-token") or "",
        resume_last_subscription="news",
        resume_last_message_id=second.early[0].get("message-id") or "",
    )
    assert third.connected.get("resumed") == "true"
    assert [f.body for f in third.early] == [b"m2", b"m3"]


def test_a_resume_whose_subscriptions_cannot_be_made_again_ends_with_an_error() -> None:
    """A subscription refused on resume (a lower limit now) is an ERROR; nothing stays behind."""
    here = world()
    first = here.client(resume_token="")
    first.send_frame("SUBSCRIBE", id="a", destination="/topic/a")
    first.send_frame("SUBSCRIBE", id="b", destination="/topic/b")
    first.session.connection_lost()
    assert here.config is not None
    stricter = SessionConfig(
        heartbeat=(0, 0), max_subscriptions=1, resumption=here.config.resumption
    )
    token = first.connected.get("resume-token") or ""
    again = Client(here.broker, here.clock, "1.2", stricter, resume_token=token)
    assert again.connected.get("resumed") == "true"
    [error] = again.early
    assert error.command == "ERROR" and error.get("message") == "too many subscriptions"
    topics = here.broker.engine.topics
    assert not topics.match("/topic/a") and not topics.match("/topic/b")
