"""
Message selectors: the SQL-92 subset of JMS 1.1 (section 3.8.1.1) over STOMP headers.

A SUBSCRIBE may carry ``selector:`` with a condition such as
``type = 'order' AND amount > 100``; only the messages for which it is TRUE reach
that subscription.  ActiveMQ, Artemis and Apollo accept the same language.

How it plugs in
---------------
The session (or the router, when it takes the SUBSCRIBE) calls
:func:`compile_selector` once per subscription and keeps the :class:`Selector`
with it; a bad selector raises :class:`~stompbroker.protocol.errors.InvalidSelector`,
which goes back as an ERROR naming the column and what was expected there.
Compiled selectors are cached by text, so a thousand subscriptions with one
selector compile it once and share the result.

- Topics: fan-out tests ``subscription.selector`` (``None`` for most) and only
  then builds the message's header dict, once per published message, with
  :func:`message_properties`; subscriptions without a selector pay one attribute
  test.  ``if selector is not None and not selector.matches(properties): skip``.
- Queues: a consumer with a selector takes only the messages it selects; a queue
  dispatch that meets a message no consumer with room selects leaves it waiting
  and looks at the next one (as a held message group does, see
  :mod:`stompbroker.broker.queueing.groups`), so non-matching messages do not block.

Language
--------
- Conditions: ``=``, ``<>``, ``<``, ``>``, ``<=``, ``>=``; ``AND``, ``OR``, ``NOT`` and
  parentheses; ``x [NOT] BETWEEN a AND b``; ``x [NOT] IN ('a', 'b', -3)`` (JMS
  lists strings only; numbers are an extension);
  ``x [NOT] LIKE 'a%_' [ESCAPE '!']``; ``x IS [NOT] NULL``.  Keywords are
  case-insensitive.
- Arithmetic: ``+ - * /`` and unary ``+ -``; integer division truncates toward zero
  (as Java's does) and a division by zero is unknown.
- Literals: strings in single quotes (``''`` is one quote); integers in decimal,
  hexadecimal (``0x1F``), octal (``017``) with an optional ``L``; decimals and
  exponents (``1.5``, ``.5``, ``2e3``) with an optional ``F``/``D``; ``TRUE``,
  ``FALSE``.
- Identifiers are header names: ``[A-Za-z_$][A-Za-z0-9_$.]*``; a name with other
  characters, such as ``content-type``, is written in double quotes
  (``"content-type" = 'text/plain'``), as SQL-92 quotes identifiers (a bare ``-``
  is subtraction), as is a name spelled like a keyword (``"not" = 1``).  The JMS
  header names map to their STOMP headers, as ActiveMQ's STOMP support maps them:
  ``JMSMessageID`` -> ``message-id``, ``JMSCorrelationID`` -> ``correlation-id``,
  ``JMSType`` -> ``type``, ``JMSPriority`` -> ``priority`` (4 when absent),
  ``JMSTimestamp`` -> ``timestamp``, ``JMSExpiration`` -> ``expires`` (0 when absent),
  ``JMSDestination`` -> ``destination``, ``JMSReplyTo`` -> ``reply-to``,
  ``JMSRedelivered`` -> ``redelivered`` (false when absent), and
  ``JMSDeliveryMode`` is ``'PERSISTENT'`` when ``persistent:true``, else
  ``'NON_PERSISTENT'``.  ``JMSXGroupID`` and the like are headers of that name.

Values and unknown
------------------
Header values are text.  A header compares as a number when the other side is
numeric (a numeric literal or arithmetic), as a boolean when the other side is a
condition or ``TRUE``/``FALSE``, and as text when the other side is a string
literal; two headers compare as numbers when both read as numbers, else as text.
A header that is absent, or that does not read as the type the comparison needs
(``amount > 5`` with ``amount:lots``), makes the comparison *unknown*, and logic is
three-valued as in SQL: ``unknown AND FALSE`` is FALSE, ``unknown OR TRUE`` is TRUE,
``NOT unknown`` is unknown.  A message is selected only when the selector is TRUE.
Comparisons that can never be true because their types differ
(``5 = 'five'``, ``TRUE > FALSE``, ``'a' + 1``) are refused when the selector is
compiled instead of being silently false.

Modules
-------
:mod:`~stompbroker.broker.features.selectors.grammar` holds the grammar and turns parse
failures into errors; :mod:`~stompbroker.broker.features.selectors.compiler` turns a
parse tree into closures, with the help of
:mod:`~stompbroker.broker.features.selectors.values` (text as numbers and booleans).  This
package imports lark, attrs and the protocol's errors and message, nothing else
of the broker.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from attrs import field, frozen

from stompbroker.broker.features.selectors.compiler import compile_tree
from stompbroker.broker.features.selectors.grammar import check_depth, parse
from stompbroker.protocol.errors import InvalidSelector
from stompbroker.protocol.message import Message

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "Selector",
    "compile_selector",
    "message_properties",
]

#: Longest selector accepted, in characters.
MAX_LENGTH = 4096
#: Deepest nesting of the parse tree accepted (``NOT NOT ...``, ``-(-(...))``):
#: compilation recurses once per level.
MAX_DEPTH = 100
#: How many compiled selectors the cache keeps, by text.
DEFAULT_CACHE_SIZE = 1024


@frozen
class Selector:
    """
    One compiled selector; immutable, so subscriptions share it through the cache.

    :ivar text: the selector as the client sent it.
    :ivar matches: ``matches(headers) -> bool``: whether a message with these
        headers (a mapping of name to text, see :func:`message_properties`) is
        selected, that is, whether the selector is TRUE for it.
    """

    text: str
    matches: Callable[[Mapping[str, str]], bool] = field(eq=False, repr=False)

    def selects(self, message: Message) -> bool:
        """
        :returns: whether ``message`` is selected; builds its headers each call, so
            a fan-out to several selectors builds them once with
            :func:`message_properties` and calls :attr:`matches`.
        """
        return self.matches(message_properties(message))


def message_properties(message: Message) -> dict[str, str]:
    """
    The headers a selector sees for a message: what was sent, and what the broker knows.

    :param message: a routed message.
    :returns: its headers (the first of a repeated header wins, STOMP 1.2
        "Repeated Header Entries") plus ``destination``, ``message-id``,
        ``persistent:true`` for a message the store keeps, and ``redelivered`` and
        ``redelivery-count`` for a redelivery.
    """
    properties = dict(reversed(message.headers))
    properties["destination"] = message.destination
    properties["message-id"] = message.message_id
    if message.persistent:
        properties["persistent"] = "true"
    if message.redeliveries:
        properties["redelivered"] = "true"
        properties["redelivery-count"] = str(message.redeliveries)
    return properties


@functools.lru_cache(maxsize=DEFAULT_CACHE_SIZE)
def compile_selector(
    text: str, *, max_length: int = MAX_LENGTH, max_depth: int = MAX_DEPTH
) -> Selector:
    """
    Compile a selector once; later calls with the same text return the same object.

    :param text: the ``selector`` header's value.
    :param max_length: longest selector accepted, in characters.
    :param max_depth: deepest nesting accepted.
    :returns: the compiled :class:`Selector`.
    :raises InvalidSelector: if the text is not a selector, naming the column and
        what was expected there; or if it is too long or too deep.
    """
    if len(text) > max_length:
        raise InvalidSelector(
            f"selector too long: {len(text)} characters, at most {max_length}",
            column=max_length + 1,
        )
    tree = parse(text)
    check_depth(text, tree, max_depth)
    evaluate = compile_tree(text, tree)

    def matches(headers: Mapping[str, str]) -> bool:
        return evaluate(headers.get) is True

    return Selector(text, matches)
