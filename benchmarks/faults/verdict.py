"""
What a run's history says: the figures of one row of the guarantee table.

- **lost**: receipted SENDs whose ``seq`` no consumer ever got (the promise
  broken: a RECEIPT means the cluster has the message);
- **duplicates**: every copy of a ``seq`` after its first, split by whether it
  carried ``redelivered:true`` (the promise: a second copy always does);
- **cut off**: ERRORs and disconnects the consumers and the publishers saw;
- **recover**: seconds from the fault's healing to the first delivery of a
  message sent after it (the flow is back end to end: a publisher held by
  the broker sends again only once its receipts come);
  **gap**: the longest stretch in which node B's consumers (those of the
  node the faults hit) got nothing, from the fault until the publishers
  stopped; **stall**: the same for every consumer together;
  **worst**: the longest a receipted message took from its SEND to its first
  delivery.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from attrs import frozen

from benchmarks.faults.clients import Event

__all__ = ["Timeline", "judge"]

#: Examples of lost messages and silent duplicates kept in the JSON line.
EXAMPLES = 5


@frozen
class Timeline:
    """
    When the fault happened, by ``time.monotonic()``.

    :ivar fault: when it was injected.
    :ivar healed: when it was healed.
    :ivar quiet: when the publishers stopped.
    """

    fault: float
    healed: float
    quiet: float


def judge(events: list[Event], timeline: Timeline) -> dict[str, Any]:
    """:returns: the figures of one run, as the JSON line carries them."""
    sent: dict[str, float] = {}
    receipted: set[str] = set()
    refused: set[str] = set()
    copies: dict[str, list[Event]] = defaultdict(list)
    errors: Counter[str] = Counter()
    cut: Counter[str] = Counter()
    for event in events:
        role = "publisher" if event.client.startswith("p") else "consumer"
        if event.kind == "send":
            sent[event.seq] = event.at
        elif event.kind == "receipt":
            receipted.add(event.seq)
        elif event.kind == "message":
            copies[event.seq].append(event)
        elif event.kind == "error":
            cut[f"{role}_errors"] += 1
            errors[event.detail] += 1
            if event.seq:
                refused.add(event.seq)
        elif event.kind == "disconnect":
            cut[f"{role}_disconnects"] += 1
    lost = sorted(receipted - copies.keys())
    marked = unmarked = 0
    silent: list[dict[str, Any]] = []
    for seq, delivered in copies.items():
        for copy in delivered[1:]:
            if copy.redelivered:
                marked += 1
            else:
                unmarked += 1
                if len(silent) < EXAMPLES:
                    silent.append(
                        {
                            "seq": seq,
                            "copies": [
                                [e.client, e.detail, e.redelivered, round(e.at - timeline.fault, 3)]
                                for e in delivered
                            ],
                        }
                    )
    deliveries = sorted(event.at for event in events if event.kind == "message")
    homed = sorted(
        event.at for event in events if event.kind == "message" and event.client.startswith("cb")
    )
    after = sorted(
        delivered[0].at
        for seq, delivered in copies.items()
        if sent.get(seq, 0.0) >= timeline.healed
    )
    waits = [copies[seq][0].at - sent[seq] for seq in receipted if seq in copies and seq in sent]
    return {
        "sent": len(sent),
        "receipted": len(receipted),
        "refused": len(refused),
        "unanswered": len(sent.keys() - receipted - refused),
        "delivered": len(copies),
        "lost": len(lost),
        "lost_examples": lost[:EXAMPLES],
        "duplicates_redelivered": marked,
        "duplicates_silent": unmarked,
        "silent_examples": silent,
        "consumer_errors": cut["consumer_errors"],
        "consumer_disconnects": cut["consumer_disconnects"],
        "publisher_errors": cut["publisher_errors"],
        "publisher_disconnects": cut["publisher_disconnects"],
        "error_messages": dict(errors.most_common(3)),
        "recover_s": round(after[0] - timeline.healed, 3) if after else None,
        "gap_s": _longest_gap(homed, timeline),
        "stall_s": _longest_gap(deliveries, timeline),
        "worst_s": round(max(waits), 3) if waits else None,
        "ok": not lost and not unmarked,
    }


def _longest_gap(deliveries: list[float], timeline: Timeline) -> float:
    """:returns: the longest time without a delivery from the fault until the load stopped."""
    window = [timeline.fault]
    window += [at for at in deliveries if timeline.fault < at < timeline.quiet]
    window.append(timeline.quiet)
    return round(
        max(later - earlier for earlier, later in zip(window, window[1:], strict=False)), 3
    )
