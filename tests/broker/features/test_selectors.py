"""
Tests for :mod:`stompbroker.broker.features.selectors`: the JMS 1.1 selector language over STOMP
headers.

The reference is JMS 1.1 section 3.8.1.1 ("Message Selector Syntax"); where STOMP's
text-only headers need a rule JMS does not give, the module docstring states it and
these tests pin it.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.features.selectors import (
    Selector,
    compile_selector,
    message_properties,
)
from stompbroker.protocol.errors import InvalidSelector, ProtocolError
from stompbroker.protocol.message import Message

HEADERS = {
    "type": "order",
    "amount": "150",
    "price": "2.5",
    "flag": "true",
    "off": "FALSE",
    "word": "lots",
    "content-type": "text/plain",
    "name": "bob",
    "other": "bob",
    "ten": "10",
    "nine": "9",
    "quote": "it's",
    "path": "a%b_c",
}


def selects(selector: str, headers: dict[str, str] = HEADERS) -> bool:
    """Compile ``selector`` and apply it to ``headers``."""
    return compile_selector(selector).matches(headers)


@pytest.mark.parametrize(
    "selector, expected",
    [
        # comparisons of a header with a number compare numbers
        ("amount = 150", True),
        ("amount <> 150", False),
        ("amount > 100", True),
        ("amount >= 150", True),
        ("amount < 150", False),
        ("amount <= 149", False),
        ("price = 2.5", True),
        ("price > 2", True),
        ("ten > nine", True),  # both read as numbers: 10 > 9, not '10' < '9'
        ("amount = 150.0", True),
        ("100 < amount", True),  # a constant on the left is reflected
        # with a string literal, strings
        ("type = 'order'", True),
        ("type <> 'order'", False),
        ("amount = '150'", True),
        ("amount = '150.0'", False),
        ("name > 'alice'", True),
        ("quote = 'it''s'", True),  # '' is one quote inside a literal
        ("name = other", True),
        ("type = name", False),
        # with a condition or TRUE/FALSE, booleans
        ("flag = TRUE", True),
        ("flag", True),
        ("off", False),
        ("NOT off", True),
        ("off = FALSE", True),
        ("(amount > 100) = flag", True),
        ("(amount > 100) <> TRUE", False),
        # logic and precedence: NOT binds tighter than AND, AND tighter than OR
        ("type = 'order' AND amount > 100", True),
        ("type = 'x' OR amount > 100", True),
        ("type = 'x' OR amount > 100 AND flag", True),
        ("(type = 'x' OR amount > 100) AND off", False),
        ("NOT type = 'x' AND flag", True),
        ("NOT (type = 'order' AND flag)", False),
        # arithmetic
        ("amount * 2 - 100 = 200", True),
        ("amount - 100 - 25 = 25", True),  # left to right
        ("amount / 10 / 5 = 3", True),
        ("2 + 3 * 4 = 14", True),
        ("(2 + 3) * 4 = 20", True),
        ("-amount < 0", True),
        ("- -amount = 150", True),
        ("+amount = 150", True),
        ("7 / 2 = 3", True),  # integer division truncates, as Java's does
        ("-7 / 2 = -3", True),  # toward zero
        ("7.0 / 2 = 3.5", True),
        ("price * 2 = 5", True),
        # literals
        ("0x10 = 16", True),
        ("0X1f = 31", True),
        ("010 = 8", True),  # a leading 0 is octal, as in ActiveMQ
        ("0 = 0", True),
        ("150L = amount", True),
        ("1.5e2 = amount", True),
        (".5 = 0.5", True),
        ("2e1 = 20", True),
        ("2.5F = price", True),
        ("2.5d = price", True),
        # BETWEEN, IN, LIKE, IS NULL
        ("amount BETWEEN 100 AND 200", True),
        ("amount BETWEEN 150 AND 150", True),
        ("amount NOT BETWEEN 100 AND 200", False),
        ("amount BETWEEN 151 AND 200 OR flag", True),
        ("type BETWEEN 'a' AND 'p'", True),
        ("type IN ('a', 'order')", True),
        ("type NOT IN ('a', 'order')", False),
        ("amount IN (1, 150)", True),
        ("amount IN (1, 150.0)", True),
        ("amount IN ('150')", True),
        ("amount IN (1, 2)", False),
        ("amount IN (-150, +150)", True),
        ("amount NOT IN (-150)", True),
        ("type LIKE 'or%'", True),
        ("type LIKE '%der'", True),
        ("type LIKE 'o_der'", True),
        ("type LIKE 'o_er'", False),
        ("type LIKE 'ORDER'", False),  # LIKE is case-sensitive
        ("type NOT LIKE 'x%'", True),
        ("path LIKE 'a!%b!_c' ESCAPE '!'", True),
        ("path LIKE 'a!%b!_d' ESCAPE '!'", False),
        ("'line\nbreak' LIKE 'line%'", True),  # % spans line breaks too
        ("path LIKE '%.%'", False),  # regex characters in a pattern are literal
        ("missing IS NULL", True),
        ("type IS NULL", False),
        ("type IS NOT NULL", True),
        ("missing IS NOT NULL", False),
        ("amount / 0 IS NULL", True),
        # keywords are case-insensitive; names that start with a keyword are names
        ("type = 'order' and amount between 100 And 200", True),
        ("flag = true", True),
        ("\"content-type\" LIKE 'text/%'", True),  # quoted names hold any character
    ],
)
def test_selector_semantics(selector: str, expected: bool) -> None:
    """Each operator of JMS 1.1 section 3.8.1.1 evaluates as the spec (and the module) says."""
    assert selects(selector) is expected


@pytest.mark.parametrize(
    "selector",
    [
        "missing = 1",
        "missing <> 1",
        "NOT missing = 1",
        "word > 5",  # not a number: the comparison is unknown, neither side of it
        "NOT word > 5",
        "word BETWEEN 1 AND 2",
        "word NOT BETWEEN 1 AND 2",
        "missing IN ('a')",
        "missing NOT IN ('a')",
        "missing LIKE '%'",
        "missing NOT LIKE '%'",
        "type = 'order' AND missing = 1",
        "missing",
        "NOT missing",
        "word",  # a header used as a condition must read true or false
        "amount / 0 = 1",
        "NOT amount / 0 = 1",
        "missing + 1 = 1",
        "-missing = 1",
        "amount BETWEEN missing AND 200",
        "NOT amount BETWEEN missing AND 200",
        "name = missing",
    ],
)
def test_unknown_is_not_selected(selector: str) -> None:
    """A selector that evaluates to unknown does not select the message, nor does its NOT."""
    assert selects(selector) is False


@pytest.mark.parametrize(
    "left, right, and_result, or_result",
    [
        ("t", "t", True, True),
        ("t", "f", False, True),
        ("t", "u", None, True),
        ("f", "f", False, False),
        ("f", "u", False, None),
        ("u", "u", None, None),
    ],
)
def test_three_valued_logic(left: str, right: str, and_result: bool, or_result: bool) -> None:
    """AND and OR follow JMS 1.1's truth tables, with unknown (SQL NULL) as the third value."""
    headers = {"t": "true", "f": "false"}
    for a, b in ((left, right), (right, left)):
        assert selects(f"{a} AND {b}", headers) is (and_result is True)
        assert selects(f"NOT ({a} AND {b})", headers) is (and_result is False)
        assert selects(f"{a} OR {b}", headers) is (or_result is True)
        assert selects(f"NOT ({a} OR {b})", headers) is (or_result is False)


@pytest.mark.parametrize(
    "selector, headers",
    [
        ("JMSMessageID = 'm-1'", {"message-id": "m-1"}),
        ("JMSCorrelationID = 'c-1'", {"correlation-id": "c-1"}),
        ("JMSType = 'order'", {"type": "order"}),
        ("JMSPriority = 7", {"priority": "7"}),
        ("JMSPriority = 4", {}),
        ("JMSTimestamp > 1000", {"timestamp": "2000"}),
        ("JMSExpiration = 0", {}),
        ("JMSExpiration = 5", {"expires": "5"}),
        ("JMSDestination = '/queue/a'", {"destination": "/queue/a"}),
        ("JMSReplyTo = '/temp-queue/r'", {"reply-to": "/temp-queue/r"}),
        ("JMSRedelivered = FALSE", {}),
        ("JMSRedelivered", {"redelivered": "true"}),
        ("JMSDeliveryMode = 'PERSISTENT'", {"persistent": "true"}),
        ("JMSDeliveryMode = 'NON_PERSISTENT'", {}),
        ("JMSXGroupID = 'g'", {"JMSXGroupID": "g"}),
        ("a.b.c = 1", {"a.b.c": "1"}),
        ("$x_1 = 1", {"$x_1": "1"}),
        ('"my header" = 1', {"my header": "1"}),
        ('"say ""hi""" = 1', {'say "hi"': "1"}),
    ],
)
def test_header_names(selector: str, headers: dict[str, str]) -> None:
    """JMS header names read their STOMP headers as ActiveMQ maps them; others are headers."""
    assert selects(selector, headers)


@pytest.mark.parametrize(
    "selector, column, complaint",
    [
        ("a = ", 5, "found the end of the selector"),
        ("a = 1 b", 7, "expected '+', '-', '*', '/', AND, OR or the end of the selector"),
        ("(a = 1", 7, "expected ')'"),
        ("a @ 1", 3, "found '@'"),
        ("a = 'open", 5, 'found "\'"'),
        ("", 1, "expected a header name"),
        ("a IN ()", 7, "found ')'"),
        ("a = 1 AND", 10, "found the end of the selector"),
        ("NOT", 4, "found the end of the selector"),
        ("a BETWEEN 1 OR 2", 13, "expected AND, found 'OR'"),
        ("5", 1, "expected a condition, found a number"),
        ("'x'", 1, "expected a condition, found a string"),
        ("NOT 5", 5, "expected a condition, found a number"),
        ("a = 1 AND 2", 11, "expected a condition, found a number"),
        ("5 = 'five'", 1, "cannot compare a number with a string"),
        ("a + 1 = 'x'", 1, "cannot compare a number with a string"),
        ("'a' + 1 = 2", 1, "expected a number, found a string"),
        ("TRUE > FALSE", 1, "conditions compare only with = and <>"),
        ("(a = 1) = 5", 11, "cannot compare a condition with a number"),
        ("a IN (TRUE)", 7, "IN lists strings and numbers"),
        ("5 IN ('a')", 1, "cannot compare a number"),
        ("(a = 1) IN (1)", 2, "expected a string, a number or a header before IN"),
        ("5 LIKE 'a'", 1, "LIKE matches strings, not a number"),
        ("a LIKE 'x!' ESCAPE '!'", 8, "the pattern ends with its ESCAPE character"),
        ("a LIKE 'x' ESCAPE 'ab'", 19, "ESCAPE takes exactly one character"),
        ("a LIKE 'x' ESCAPE ''", 19, "ESCAPE takes exactly one character"),
        ("a = 09", 5, "09 is not an octal number"),
        ("content-type", 1, "expected a condition, found a number"),  # a - is subtraction
    ],
)
def test_invalid_selectors_name_column_and_expectation(
    selector: str, column: int, complaint: str
) -> None:
    """A bad selector raises InvalidSelector naming the column and what was expected there."""
    with pytest.raises(InvalidSelector) as caught:
        compile_selector(selector)
    error = caught.value
    assert error.column == column
    assert error.message.startswith(f"invalid selector at column {column}: ")
    assert complaint in error.message


def test_invalid_selector_is_a_protocol_error_with_a_caret() -> None:
    """The error is a ProtocolError, so the session sends it as an ERROR; the body points at it."""
    with pytest.raises(ProtocolError) as caught:
        compile_selector("a = 1 b")
    assert isinstance(caught.value, InvalidSelector)
    assert caught.value.detail.splitlines()[1:] == ["  a = 1 b", "        ^"]
    assert caught.value.expected == (
        "'+', '-'",
        "'*', '/'",
        "AND",
        "OR",
        "the end of the selector",
    )


def test_keywords_are_reserved_but_quotable() -> None:
    """A header named like a keyword is written in double quotes; bare, it is the keyword."""
    with pytest.raises(InvalidSelector):
        compile_selector("not = 1")
    assert selects('"not" = 1', {"not": "1"})
    assert selects("andy = 1 AND notes = 2 AND isbn = 3", {"andy": "1", "notes": "2", "isbn": "3"})


def test_too_long_selector_is_refused() -> None:
    """A selector longer than max_length is refused before it is parsed."""
    text = "a = 1 OR " * 10 + "a = 1"
    compile_selector(text, max_length=len(text))
    with pytest.raises(InvalidSelector) as caught:
        compile_selector(text, max_length=len(text) - 1)
    assert "too long" in caught.value.message


def test_deep_nesting_is_refused_without_recursion_error() -> None:
    """Nesting beyond max_depth is an InvalidSelector, even far beyond Python's recursion limit."""
    assert selects("NOT " * 20 + "flag")
    with pytest.raises(InvalidSelector) as caught:
        compile_selector("NOT " * 20 + "flag", max_depth=10)
    assert "nested deeper than 10 levels" in caught.value.message
    with pytest.raises(InvalidSelector):
        compile_selector("-(" * 1500 + "1" + ")" * 1500 + " = 1", max_length=10_000)


def test_long_flat_selectors_are_not_deep() -> None:
    """A long chain of AND, OR or + is one flat node, not a deep one."""
    chain = " OR ".join(f"a = {n}" for n in range(300))
    assert selects(chain, {"a": "299"})
    assert selects(" + ".join(["1"] * 500) + " = 500", {})


def test_selectors_are_cached_by_text() -> None:
    """A thousand subscriptions with one selector share one compiled Selector."""
    first = compile_selector("cached = 1")
    assert all(compile_selector("cached = 1") is first for _ in range(1000))
    assert compile_selector("cached = 2") is not first
    assert isinstance(first, Selector)
    assert first.text == "cached = 1"


def test_message_properties_what_the_broker_knows() -> None:
    """A selector sees the first of a repeated header and the broker's own fields of the message."""
    message = Message(
        "/queue/a",
        "m-7",
        (("colour", "red"), ("colour", "blue"), ("amount", "3")),
        b"",
        persistent=True,
        redeliveries=2,
    )
    assert message_properties(message) == {
        "colour": "red",
        "amount": "3",
        "destination": "/queue/a",
        "message-id": "m-7",
        "persistent": "true",
        "redelivered": "true",
        "redelivery-count": "2",
    }
    selector = compile_selector(
        "colour = 'red' AND JMSMessageID = 'm-7' AND JMSDeliveryMode = 'PERSISTENT'"
        " AND JMSRedelivered AND JMSDestination LIKE '/queue/%'"
    )
    assert selector.selects(message)


def test_message_properties_of_a_plain_message() -> None:
    """A first delivery of a non-persistent message says nothing of persistence or redelivery."""
    message = Message("/topic/t", "m-1", (("a", "1"),), b"")
    assert message_properties(message) == {
        "a": "1",
        "destination": "/topic/t",
        "message-id": "m-1",
    }
    assert compile_selector("NOT JMSRedelivered AND JMSPriority = 4").selects(message)
