"""
The selector compiler: a parse tree in, one closure per node out.

A message then costs one Python call per node and no dispatch on node types, which
a tree-walking interpreter would pay at every node of every message.  The kinds of
the operands (condition, number, string literal, header) are known at compile
time, so each comparison is compiled in the one mode its kinds call for (see
:mod:`stompbroker.broker.features.selectors` for the rules), type errors are found before
any message is seen, and constant sub-expressions are folded.

Every closure takes ``get``, the headers' ``Mapping.get`` bound once per message,
and returns ``None`` for SQL's unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from attrs import frozen
from lark import Token, Tree

from stompbroker.broker.features.selectors.grammar import column_of, invalid
from stompbroker.broker.features.selectors.values import (
    ARITHMETIC,
    COMPARISONS,
    JMS_HEADERS,
    REFLECTED,
    to_boolean,
    to_number,
)
from stompbroker.protocol.errors import InvalidSelector

__all__ = ["Evaluate", "compile_tree"]

# The kinds of value an expression has, known when it is compiled.
_CONDITION = "a condition"
_NUMBER = "a number"
_STRING = "a string"
_HEADER = "a header"

#: Marks an operand whose value is not known at compile time.
_VARIABLE = object()

Getter = Callable[..., Any]
Evaluate = Callable[[Getter], Any]


@frozen
class _Operand:
    """
    A compiled sub-expression.

    :ivar kind: what it yields: :data:`_CONDITION` (True, False or None for
        unknown), :data:`_NUMBER`, :data:`_STRING` (a literal), :data:`_HEADER`
        (a header's text, or None when absent).
    :ivar evaluate: ``evaluate(get)``, with ``get`` the headers' ``Mapping.get``.
    :ivar column: where it starts in the selector, for errors.
    :ivar constant: its value if it is known at compile time, else :data:`_VARIABLE`.
    """

    kind: str
    evaluate: Evaluate
    column: int
    constant: Any = _VARIABLE


def _constant(kind: str, value: Any, column: int) -> _Operand:
    return _Operand(kind, lambda get: value, column, value)


class _Compiler:
    """
    Turns a parse tree into nested closures, checking the kinds of operands on the way.

    Each rule of the grammar has a method of its name; each returns an
    :class:`_Operand`.  Closures rather than a tree-walking interpreter: a message
    then costs one call per node and no dispatch on node types.
    """

    def __init__(self, text: str) -> None:
        self._text = text

    def _fail(self, node: Tree | Token | _Operand, what: str) -> InvalidSelector:
        column = node.column if isinstance(node, _Operand) else column_of(node)
        return invalid(self._text, column, what)

    def compile(self, node: Tree | Token) -> _Operand:
        """:returns: the compiled operand for any node."""
        assert isinstance(node, Tree)
        method: Callable[[Tree], _Operand] = getattr(self, "_" + str(node.data).rstrip("_"))
        return method(node)

    # -- coercions --------------------------------------------------------------

    def condition(self, node: Tree | Token) -> _Operand:
        """Compile a node that must be a condition; a header reads as a boolean."""
        return self._as_condition(self.compile(node), "expected a condition, found {kind}")

    def _as_condition(self, operand: _Operand, complaint: str) -> _Operand:
        """
        :param complaint: the error for an operand of another kind; ``{kind}`` names it.
        """
        if operand.kind == _CONDITION:
            return operand
        if operand.kind != _HEADER:
            raise self._fail(operand, complaint.format(kind=operand.kind))
        inner = operand.evaluate

        def evaluate(get: Getter) -> bool | None:
            value = inner(get)
            return None if value is None else to_boolean(value)

        return _Operand(_CONDITION, evaluate, operand.column)

    def _as_number(self, operand: _Operand) -> _Operand:
        if operand.kind == _NUMBER:
            return operand
        if operand.kind == _HEADER:
            inner = operand.evaluate

            def evaluate(get: Getter) -> int | float | None:
                value = inner(get)
                return None if value is None else to_number(value)

            return _Operand(_NUMBER, evaluate, operand.column)
        raise self._fail(operand, f"expected a number, found {operand.kind}")

    # -- logic ------------------------------------------------------------------

    def _disjunction(self, node: Tree) -> _Operand:
        return self._junction(node, decisive=True)

    def _conjunction(self, node: Tree) -> _Operand:
        return self._junction(node, decisive=False)

    def _junction(self, node: Tree, decisive: bool) -> _Operand:
        parts = tuple(self.condition(child).evaluate for child in node.children)
        return _junction(parts, decisive, column_of(node))

    def _not(self, node: Tree) -> _Operand:
        return _negate(self.condition(node.children[0]), column_of(node))

    # -- predicates -------------------------------------------------------------

    def _compare(self, node: Tree) -> _Operand:
        left_node, symbol, right_node = node.children
        return self._comparison(
            self.compile(left_node), str(symbol), self.compile(right_node), column_of(node)
        )

    def _comparison(self, left: _Operand, symbol: str, right: _Operand, column: int) -> _Operand:
        """
        Compile ``left symbol right`` in the mode the operands' kinds call for.
        """
        kinds = {left.kind, right.kind}
        if _CONDITION in kinds:
            if symbol not in ("=", "<>"):
                raise invalid(
                    self._text, column, f"conditions compare only with = and <>, not {symbol}"
                )
            complaint = "cannot compare a condition with {kind}"
            left = self._as_condition(left, complaint)
            right = self._as_condition(right, complaint)
        elif _NUMBER in kinds:
            if _STRING in kinds:
                raise invalid(self._text, column, "cannot compare a number with a string")
            left, right = self._as_number(left), self._as_number(right)
        elif kinds == {_HEADER}:
            return self._dynamic_comparison(left, symbol, right, column)
        if left.constant is not _VARIABLE and right.constant is _VARIABLE:
            left, right, symbol = right, left, REFLECTED[symbol]
        compare = COMPARISONS[symbol]
        value_of = left.evaluate
        constant = right.constant
        if constant is not _VARIABLE:
            if constant is None:
                return _constant(_CONDITION, None, column)
            if left.constant is not _VARIABLE:
                value = left.constant
                return _constant(
                    _CONDITION, None if value is None else compare(value, constant), column
                )

            def evaluate(get: Getter) -> bool | None:
                value = value_of(get)
                return None if value is None else compare(value, constant)

            return _Operand(_CONDITION, evaluate, column)
        other_of = right.evaluate

        def evaluate_both(get: Getter) -> bool | None:
            value = value_of(get)
            if value is None:
                return None
            other = other_of(get)
            return None if other is None else compare(value, other)

        return _Operand(_CONDITION, evaluate_both, column)

    def _dynamic_comparison(
        self, left: _Operand, symbol: str, right: _Operand, column: int
    ) -> _Operand:
        """Two headers: as numbers when both read as numbers, else as text."""
        compare = COMPARISONS[symbol]
        left_of, right_of = left.evaluate, right.evaluate

        def evaluate(get: Getter) -> bool | None:
            value = left_of(get)
            if value is None:
                return None
            other = right_of(get)
            if other is None:
                return None
            number, other_number = to_number(value), to_number(other)
            if number is not None and other_number is not None:
                return compare(number, other_number)
            return compare(value, other)

        return _Operand(_CONDITION, evaluate, column)

    def _between(self, node: Tree) -> _Operand:
        value_node, low_node, high_node = node.children
        value = self.compile(value_node)
        column = column_of(node)
        at_least = self._comparison(value, ">=", self.compile(low_node), column)
        at_most = self._comparison(value, "<=", self.compile(high_node), column)
        return _junction((at_least.evaluate, at_most.evaluate), False, column)

    def _not_between(self, node: Tree) -> _Operand:
        return _negate(self._between(node), column_of(node))

    def _in(self, node: Tree) -> _Operand:
        value = self.compile(node.children[0])
        literals = [self.compile(child) for child in node.children[1:]]
        strings = frozenset(item.constant for item in literals if item.kind == _STRING)
        numbers = frozenset(item.constant for item in literals if item.kind == _NUMBER)
        for item in literals:
            if item.kind == _CONDITION:
                raise self._fail(item, "IN lists strings and numbers, not TRUE or FALSE")
        if value.kind == _CONDITION:
            raise self._fail(value, "expected a string, a number or a header before IN")
        if (value.kind == _STRING and numbers) or (value.kind == _NUMBER and strings):
            raise self._fail(value, f"cannot compare {value.kind} with the IN list's values")
        value_of = value.evaluate
        is_header = value.kind == _HEADER

        def evaluate(get: Getter) -> bool | None:
            found = value_of(get)
            if found is None:
                return None
            if found in strings:
                return True
            if not is_header:
                return found in numbers
            if numbers:
                number = to_number(found)
                return number is not None and number in numbers
            return False

        return _Operand(_CONDITION, evaluate, column_of(node))

    def _not_in(self, node: Tree) -> _Operand:
        return _negate(self._in(node), column_of(node))

    def _like(self, node: Tree) -> _Operand:
        value = self.compile(node.children[0])
        if value.kind not in (_HEADER, _STRING):
            raise self._fail(value, f"LIKE matches strings, not {value.kind}")
        pattern_token = node.children[1]
        assert isinstance(pattern_token, Token)
        escape = None
        if len(node.children) == 3:
            escape_token = node.children[2]
            escape = _unquote(str(escape_token), "'")
            if len(escape) != 1:
                raise self._fail(escape_token, "ESCAPE takes exactly one character")
        pattern = self._like_pattern(_unquote(str(pattern_token), "'"), escape, pattern_token)
        value_of = value.evaluate
        fullmatch = pattern.fullmatch

        def evaluate(get: Getter) -> bool | None:
            found = value_of(get)
            return None if found is None else fullmatch(found) is not None

        return _Operand(_CONDITION, evaluate, column_of(node))

    def _not_like(self, node: Tree) -> _Operand:
        return _negate(self._like(node), column_of(node))

    def _like_pattern(self, pattern: str, escape: str | None, token: Token) -> re.Pattern[str]:
        """``%`` is any run of characters, ``_`` any one; the escape makes the next literal."""
        parts = []
        characters = iter(pattern)
        for character in characters:
            if character == escape:
                following = next(characters, None)
                if following is None:
                    raise self._fail(token, "the pattern ends with its ESCAPE character")
                parts.append(re.escape(following))
            elif character == "%":
                parts.append(".*")
            elif character == "_":
                parts.append(".")
            else:
                parts.append(re.escape(character))
        return re.compile("".join(parts), re.DOTALL)

    def _is_null(self, node: Tree) -> _Operand:
        value_of = self.compile(node.children[0]).evaluate
        return _Operand(_CONDITION, lambda get: value_of(get) is None, column_of(node))

    def _is_not_null(self, node: Tree) -> _Operand:
        value_of = self.compile(node.children[0]).evaluate
        return _Operand(_CONDITION, lambda get: value_of(get) is not None, column_of(node))

    # -- arithmetic ---------------------------------------------------------------

    def _sum(self, node: Tree) -> _Operand:
        return self._arithmetic(node)

    def _product(self, node: Tree) -> _Operand:
        return self._arithmetic(node)

    def _arithmetic(self, node: Tree) -> _Operand:
        """``a op b op c ...``, left to right; unknown as soon as any step is."""
        children = node.children
        first = self._as_number(self.compile(children[0]))
        steps = tuple(
            (ARITHMETIC[str(children[index])], self._as_number(self.compile(children[index + 1])))
            for index in range(1, len(children), 2)
        )
        first_of = first.evaluate
        step_functions = tuple((apply, operand.evaluate) for apply, operand in steps)

        def evaluate(get: Getter) -> int | float | None:
            result: int | float | None = first_of(get)
            for apply, operand_of in step_functions:
                if result is None:
                    return None
                other = operand_of(get)
                if other is None:
                    return None
                result = apply(result, other)
            return result

        constant = all(operand.constant is not _VARIABLE for _, operand in steps)
        if constant and first.constant is not _VARIABLE:
            return _constant(_NUMBER, evaluate(_no_headers), column_of(node))
        return _Operand(_NUMBER, evaluate, column_of(node))

    def _sign(self, node: Tree) -> _Operand:
        symbol, operand_node = node.children
        operand = self._as_number(self.compile(operand_node))
        if str(symbol) == "+":
            return operand
        if operand.constant is not _VARIABLE:
            value = operand.constant
            return _constant(_NUMBER, None if value is None else -value, column_of(node))
        value_of = operand.evaluate

        def evaluate(get: Getter) -> int | float | None:
            value = value_of(get)
            return None if value is None else -value

        return _Operand(_NUMBER, evaluate, column_of(node))

    # -- leaves ---------------------------------------------------------------------

    def _header(self, node: Tree) -> _Operand:
        return self._lookup(str(node.children[0]), column_of(node))

    def _quoted_header(self, node: Tree) -> _Operand:
        return self._lookup(_unquote(str(node.children[0]), '"'), column_of(node))

    def _lookup(self, name: str, column: int) -> _Operand:
        """A header by name; the JMS names read their STOMP headers."""
        if name == "JMSDeliveryMode":

            def delivery_mode(get: Getter) -> str:
                return "PERSISTENT" if get("persistent") == "true" else "NON_PERSISTENT"

            return _Operand(_HEADER, delivery_mode, column)
        header, default = JMS_HEADERS.get(name, (name, None))
        if default is None:
            return _Operand(_HEADER, lambda get: get(header), column)
        return _Operand(_HEADER, lambda get: get(header, default), column)

    def _string(self, node: Tree) -> _Operand:
        return _constant(_STRING, _unquote(str(node.children[0]), "'"), column_of(node))

    def _number(self, node: Tree) -> _Operand:
        token = node.children[0]
        assert isinstance(token, Token)
        return _constant(_NUMBER, self._number_value(str(token), token), column_of(node))

    def _signed_number(self, node: Tree) -> _Operand:
        """A number with a sign, as an IN list may hold (where no arithmetic is allowed)."""
        sign, token = node.children
        assert isinstance(token, Token)
        value = self._number_value(str(token), token)
        return _constant(_NUMBER, -value if str(sign) == "-" else value, column_of(node))

    def _number_value(self, text: str, token: Token) -> int | float:
        """Read a numeric literal as ActiveMQ does: hex, octal after a leading 0, decimal."""
        if text[:2] in ("0x", "0X"):
            return int(text[2:], 16)
        if text[-1] in "lL":
            text = text[:-1]
        elif "." in text or "e" in text or "E" in text or text[-1] in "fFdD":
            return float(text.rstrip("fFdD"))
        if len(text) > 1 and text[0] == "0":
            if not set(text) <= set("01234567"):
                raise self._fail(token, f"{text} is not an octal number")
            return int(text, 8)
        return int(text)

    def _true(self, node: Tree) -> _Operand:
        return _constant(_CONDITION, True, column_of(node))

    def _false(self, node: Tree) -> _Operand:
        return _constant(_CONDITION, False, column_of(node))


def _no_headers(name: str) -> None:
    """The getter a constant expression is evaluated with: it reads no header."""
    return None


def _junction(parts: tuple[Evaluate, ...], decisive: bool, column: int) -> _Operand:
    """
    OR (``decisive`` True) or AND (False) over conditions, in SQL's three-valued
    logic: one decisive part decides, and stops the evaluation; otherwise any
    unknown part makes the whole unknown.
    """
    otherwise = not decisive
    # Compared by identity under another name, so that the type checker does not
    # narrow ``decisive`` itself to what a part returned.
    deciding = decisive

    def evaluate(get: Getter) -> bool | None:
        unknown = False
        for part in parts:
            result = part(get)
            if result is deciding:
                return decisive
            if result is None:
                unknown = True
        return None if unknown else otherwise

    return _Operand(_CONDITION, evaluate, column)


def _negate(operand: _Operand, column: int) -> _Operand:
    """NOT in three-valued logic: unknown stays unknown."""
    inner = operand.evaluate

    def evaluate(get: Getter) -> bool | None:
        result = inner(get)
        return None if result is None else not result

    return _Operand(_CONDITION, evaluate, column)


def _unquote(text: str, quote: str) -> str:
    """Strip the quotes of a literal and undouble the quotes inside it."""
    return text[1:-1].replace(quote + quote, quote)


def compile_tree(text: str, tree: Tree) -> Evaluate:
    """
    Compile a parsed selector.

    :param text: the selector, for error messages.
    :param tree: its parse tree, already checked for depth.
    :returns: ``evaluate(get) -> True | False | None``.
    :raises InvalidSelector: for operands of the wrong kind (``5 = 'five'``,
        ``NOT 5``), a bad octal literal or LIKE escape.
    """
    return _Compiler(text).condition(tree).evaluate
