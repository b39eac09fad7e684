"""The streams named in the error for a stream that shows nothing: where from, and how said."""

from __future__ import annotations

from sparkjobs.datasource.client import ConnectSettings
from sparkjobs.datasource.listing import SHOWN, StreamListing, api_url


def test_the_web_port_is_the_option_or_that_of_a_websocket_url() -> None:
    tcp = ConnectSettings("stomp://broker:61613")
    assert api_url(tcp, None) is None
    assert api_url(tcp, "http://broker:15674/") == "http://broker:15674"
    assert api_url(ConnectSettings("wss://broker:443/ws"), None) == "https://broker:443"
    assert api_url(ConnectSettings("ws://broker:15674/ws"), None) == "http://broker:15674"


def test_the_listing_says_what_it_found_or_why_it_found_nothing() -> None:
    assert StreamListing((("/stream/a", 3),)).describe() == (
        "the streams this login may read: /stream/a (3 kept)"
    )
    assert StreamListing(()).describe() == "this login may read no stream that exists"
    many = tuple((f"/stream/{n:03}", n) for n in range(SHOWN + 5))
    assert StreamListing(many).describe().endswith("/stream/019 (19 kept) and 5 more")
    assert StreamListing(None, "answered 401 Unauthorized").describe() == (
        "the streams could not be listed (answered 401 Unauthorized)"
    )
