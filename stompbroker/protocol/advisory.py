"""
Advisories: what the broker tells a client, and its operators, before it acts
on the client's behalf.  ActiveMQ's advisory topics are the model
(``ActiveMQ.Advisory.SlowConsumer.Topic...``); ours is one topic per kind.

The slow-consumer advisory: once per episode (from the moment a client falls
behind until it has caught up), when the topic messages waiting for it pass
:data:`ADVISORY_SHARE` of ``slow_consumer_buffer``, or at the latest just
before its policy applies, the client gets a MESSAGE on the subscription whose
message crossed the mark, with:

``stompbroker-advisory``
    ``slow-consumer``
``stompbroker-bytes-waiting``
    bytes of topic messages waiting for it
``stompbroker-buffer``
    the ``slow-consumer-buffer`` at which the policy applies
``stompbroker-policy``
    ``block``, ``drop-oldest`` or ``disconnect``

It goes ahead of the messages waiting (it is never dropped), so the client
reads it as soon as it reads anything.  The same headers, with the client's
``session``, address and ``subscription``, are published to
:data:`SLOW_CONSUMER_TOPIC` for operators.
"""

from __future__ import annotations

from stompbroker.protocol.encoder import encode
from stompbroker.protocol.frames import Frame

#: The header that marks an advisory, and says which.
ADVISORY_HEADER = "stompbroker-advisory"
#: Its value for a slow consumer.
SLOW_CONSUMER = "slow-consumer"
#: Where operators see every slow-consumer advisory.
SLOW_CONSUMER_TOPIC = "/topic/stompbroker.advisory.slow-consumer"
#: The share of ``slow_consumer_buffer`` waiting at which the client is warned.
ADVISORY_SHARE = 0.5


def slow_consumer_headers(waiting: int, buffer: int, policy: str) -> tuple[tuple[str, str], ...]:
    """:returns: the headers every slow-consumer advisory carries."""
    return (
        (ADVISORY_HEADER, SLOW_CONSUMER),
        ("stompbroker-bytes-waiting", str(waiting)),
        ("stompbroker-buffer", str(buffer)),
        ("stompbroker-policy", policy),
    )


def slow_consumer_text(waiting: int, policy: str) -> bytes:
    """:returns: the advisory's body: what a person reading it should know."""
    return (
        f"{waiting} bytes of messages wait for this client, which does not read them"
        f" fast enough; the broker's slow-consumer policy ({policy}) applies when its"
        " buffer is full"
    ).encode()


def slow_consumer_message(
    subscription_id: str | None,
    destination: str,
    message_id: str,
    headers: tuple[tuple[str, str], ...],
    body: bytes,
    version: str,
) -> bytes:
    """
    :returns: the encoded MESSAGE frame that warns a client on its subscription.
    :param subscription_id: ``None`` for a STOMP 1.0 subscription without id.
    """
    pairs: tuple[tuple[str, str], ...] = ()
    if subscription_id is not None:
        pairs = (("subscription", subscription_id),)
    pairs += (
        ("destination", destination),
        ("message-id", message_id),
        *headers,
        ("content-type", "text/plain;charset=utf-8"),
        ("content-length", str(len(body))),
    )
    return encode(Frame("MESSAGE", pairs, body), version)
