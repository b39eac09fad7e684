"""
The management API's detached resumable sessions (``/api/detached-sessions``)
through ``StubTreq``: the listing (never the token), ending one for good, and
the refusals: 403 for a reader, 401 for a bad token, 404 for an unknown id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.protocol.session import SessionConfig
from tests.support.api import Api, basic, bearer, refused
from tests.support.broker import Client
from tests.support.tokens import NOW, SECRET, make_token


def with_detached(api: Api) -> tuple[Client, SessionConfig]:
    """
    Make the API's broker keep resumable sessions; one drops.

    :returns: its client, and the sessions' config.
    """
    book = ResumeBook(api.clock, window=600, buffer_limit=10_000)
    api.broker.keep_resumable_sessions(book)
    config = SessionConfig(heartbeat=(0, 0), resumption=book)
    client = Client(api.broker, api.clock, "1.2", config, resume_token="")
    client.send_frame("SUBSCRIBE", id="s", destination="/topic/news")
    api.broker.publish("/topic/news", "seen")
    client.frames()
    client.session.connection_lost()
    api.broker.publish("/topic/news", "missed")
    return client, config


def test_detached_sessions_are_listed_without_their_token_and_ended_for_good() -> None:
    """GET lists the session with its figures; DELETE ends it: its token resumes no more."""
    api = Api()
    client, config = with_detached(api)
    session = client.connected.get("session")
    token = client.connected.get("resume-token") or ""
    code, [row], response = api.call("GET", "detached-sessions")
    assert code == 200
    assert row["id"] == session and row["login"] == "" and row["version"] == "1.2"
    assert (row["subscriptions"], row["buffered_frames"], row["missed"], row["gap"]) == (
        1,
        2,
        1,
        False,
    )
    assert row["buffered_bytes"] > len("seen") + len("missed")
    assert row["detached_since"].endswith("Z") and row["expires_at"] > row["detached_since"]
    assert token not in response.request.absoluteURI.decode() and token not in str(row)
    assert api.call("GET", f"detached-sessions/{session}")[1] == row
    code, ended, _ = api.call("DELETE", f"detached-sessions/{session}")
    assert (code, ended["id"]) == (200, session)
    assert api.call("GET", "detached-sessions")[1] == []
    assert not api.broker.engine.topics.match("/topic/news")
    again = Client(api.broker, api.clock, "1.2", config, resume_token=token)
    assert again.connected.get("resumed") == "false"
    assert api.broker.resumption.ended == 1


def test_without_resumable_sessions_the_list_is_empty_and_an_end_is_unknown() -> None:
    """A broker that keeps none lists none; DELETE of any id is 404 naming it."""
    api = Api()
    assert api.call("GET", "detached-sessions")[1] == []
    code, error = refused(api, "DELETE", "detached-sessions/nobody")
    assert (code, error["error"]) == (404, "unknown session") and "nobody" in error["detail"]
    assert refused(api, "POST", "detached-sessions", {})[0] == 405


def test_a_reader_lists_but_may_not_end_a_detached_session() -> None:
    """Ending needs the admin right, as closing a connection does: a reader gets 403."""
    api = Api(auth=True)
    client, _ = with_detached(api)
    session = client.connected.get("session")
    assert api.call("GET", "detached-sessions", headers=basic("reader"))[0] == 200
    code, error = refused(api, "DELETE", f"detached-sessions/{session}", None, basic("reader"))
    assert code == 403 and "admin" in error["detail"]
    code, error = refused(api, "GET", "detached-sessions", None, basic("orders"))
    assert code == 403
    assert len(api.call("GET", "detached-sessions", headers=basic("admin"))[1]) == 1
    assert api.broker.resumption.detached == 1


@pytest.mark.parametrize("auth", ["wrong password", "bad token"])
def test_bad_credentials_are_refused_and_end_nothing(tmp_path: Path, auth: str) -> None:
    """A wrong password or a bad bearer token gets 401, and the session stays."""
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    api = Api(auth=True, token_secret=secret)
    client, _ = with_detached(api)
    session = client.connected.get("session")
    if auth == "wrong password":
        headers = basic("admin", "wrong")
    else:
        expired = make_token(NOW, SECRET, "HS256", scope="stompbroker.admin", exp=int(NOW) - 60)
        headers = bearer(expired)
    code, error = refused(api, "DELETE", f"detached-sessions/{session}", None, headers)
    assert (code, error["error"]) == (401, "login failed")
    assert api.broker.resumption.detached == 1
