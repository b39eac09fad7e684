"""
The compiled selectors against a brute-force reference: random expressions, rendered as text.

Hypothesis draws expression trees over a few headers, renders each with only the
parentheses that precedence needs (or with all of them), and compares what the
compiled selector says with a direct recursive evaluation of the tree under the
rules of :mod:`stompbroker.broker.features.selectors`: three-valued logic, headers read as
numbers next to numbers, and two bare headers compared as numbers when both read
as numbers.  Same tests, two implementations (as crossbar's ``test_wildcard.py``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from stompbroker.broker.features.selectors import compile_selector

NAMES = ("a", "b", "c")
VALUES = ("0", "1", "2", "-3", "10", "2.5", "x", "abc", "", "true", "FALSE")
COMPARISONS = {
    "=": lambda left, right: left == right,
    "<>": lambda left, right: left != right,
    "<": lambda left, right: left < right,
    ">": lambda left, right: left > right,
    "<=": lambda left, right: left <= right,
    ">=": lambda left, right: left >= right,
}

# Precedence, loosest first: what each node needs of its children to go unparenthesised.
OR, AND, NOT, PREDICATE, SUM, PRODUCT, UNARY, PRIMARY = range(8)


@dataclass(frozen=True)
class Node:
    """One expression: ``kind`` is ``num`` or ``cond``; ``op`` and ``parts`` say the rest."""

    kind: str
    op: str
    parts: tuple


def as_number(text: str | None) -> int | float | None:
    """The reference's reading of a header as a number."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if text.strip() == text and text.lower() not in ("nan", "inf") else None


def evaluate(node: Node, headers: dict[str, str]) -> object:
    """Evaluate a tree directly; ``None`` is unknown."""
    op, parts = node.op, node.parts
    if op == "literal":
        return parts[0]
    if op == "header":
        return as_number(headers.get(parts[0]))
    if op == "neg":
        value = evaluate(parts[0], headers)
        return None if value is None else -value
    if op in ("+", "-", "*"):
        left, right = evaluate(parts[0], headers), evaluate(parts[1], headers)
        if left is None or right is None:
            return None
        return {"+": operator.add, "-": operator.sub, "*": operator.mul}[op](left, right)
    if op in COMPARISONS:
        return compare(op, parts[0], parts[1], headers)
    if op == "between":
        value, low, high = parts
        return conjunction(
            [compare(">=", value, low, headers), compare("<=", value, high, headers)]
        )
    if op == "in":
        text = headers.get(parts[0])
        if text is None:
            return None
        number = as_number(text)
        return number is not None and number in parts[1]
    if op == "null":
        return headers.get(parts[0]) is None
    if op == "not":
        value = evaluate(parts[0], headers)
        return None if value is None else not value
    results = [evaluate(part, headers) for part in parts]
    return conjunction(results) if op == "and" else disjunction(results)


def compare(op: str, left_node: Node, right_node: Node, headers: dict[str, str]) -> bool | None:
    """Two bare headers compare as numbers when both read as numbers, else as text."""
    if left_node.op == "header" and right_node.op == "header":
        left_text = headers.get(left_node.parts[0])
        right_text = headers.get(right_node.parts[0])
        if left_text is None or right_text is None:
            return None
        left, right = as_number(left_text), as_number(right_text)
        if left is None or right is None:
            left, right = left_text, right_text
        return COMPARISONS[op](left, right)
    left, right = evaluate(left_node, headers), evaluate(right_node, headers)
    return None if left is None or right is None else COMPARISONS[op](left, right)


def conjunction(results: list) -> bool | None:
    if False in results:
        return False
    return None if None in results else True


def disjunction(results: list) -> bool | None:
    if True in results:
        return True
    return None if None in results else False


def precedence(node: Node) -> int:
    return {
        "or": OR,
        "and": AND,
        "not": NOT,
        "+": SUM,
        "-": SUM,
        "*": PRODUCT,
        "neg": UNARY,
    }.get(node.op, PREDICATE if node.kind == "cond" else PRIMARY)


def render(node: Node, parenthesise_all: bool) -> str:
    """Write a tree as selector text, with the parentheses precedence needs (or all)."""

    def child(part: Node, least: int) -> str:
        text = render(part, parenthesise_all)
        if parenthesise_all and part.op not in ("literal", "header") or precedence(part) < least:
            return f"({text})"
        return text

    op, parts = node.op, node.parts
    if op == "literal":
        return str(parts[0])
    if op == "header":
        return parts[0]
    if op == "neg":
        return "-" + child(parts[0], UNARY)
    if op in ("+", "-", "*"):
        level = precedence(node)
        return f"{child(parts[0], level)} {op} {child(parts[1], level + 1)}"
    if op in COMPARISONS:
        return f"{child(parts[0], SUM)} {op} {child(parts[1], SUM)}"
    if op == "between":
        value, low, high = (child(part, SUM) for part in parts)
        return f"{value} BETWEEN {low} AND {high}"
    if op == "in":
        return f"{parts[0]} IN ({', '.join(str(number) for number in sorted(parts[1]))})"
    if op == "null":
        return f"{parts[0]} IS NULL"
    if op == "not":
        return "NOT " + child(parts[0], NOT)
    level = precedence(node)
    keyword = " AND " if op == "and" else " OR "
    return keyword.join(child(part, level + 1) for part in parts)


headers = st.sampled_from(NAMES).map(lambda name: Node("num", "header", (name,)))
literals = st.integers(-20, 20).map(lambda value: Node("num", "literal", (value,)))

numbers = st.recursive(
    st.one_of(headers, literals),
    lambda inner: st.one_of(
        inner.map(lambda part: Node("num", "neg", (part,))),
        st.tuples(st.sampled_from(["+", "-", "*"]), inner, inner).map(
            lambda t: Node("num", t[0], (t[1], t[2]))
        ),
    ),
    max_leaves=4,
)

predicates = st.one_of(
    st.tuples(st.sampled_from(sorted(COMPARISONS)), numbers, numbers).map(
        lambda t: Node("cond", t[0], (t[1], t[2]))
    ),
    st.tuples(numbers, numbers, numbers).map(lambda t: Node("cond", "between", t)),
    st.tuples(st.sampled_from(NAMES), st.frozensets(st.integers(-3, 10), min_size=1)).map(
        lambda t: Node("cond", "in", t)
    ),
    st.sampled_from(NAMES).map(lambda name: Node("cond", "null", (name,))),
)

conditions = st.recursive(
    predicates,
    lambda inner: st.one_of(
        inner.map(lambda part: Node("cond", "not", (part,))),
        st.tuples(st.sampled_from(["and", "or"]), st.lists(inner, min_size=2, max_size=3)).map(
            lambda t: Node("cond", t[0], tuple(t[1]))
        ),
    ),
    max_leaves=6,
)

header_values = st.fixed_dictionaries(
    {}, optional={name: st.sampled_from(VALUES) for name in NAMES}
)


@given(conditions, header_values, st.booleans())
def test_compiled_selector_agrees_with_reference(
    tree: Node, values: dict[str, str], parenthesise_all: bool
) -> None:
    """A compiled selector selects exactly when the reference evaluation is TRUE."""
    text = render(tree, parenthesise_all)
    assert compile_selector(text).matches(values) is (evaluate(tree, values) is True), text


@given(conditions, header_values)
def test_parentheses_that_precedence_implies_change_nothing(
    tree: Node, values: dict[str, str]
) -> None:
    """Minimal and full parenthesisation of one tree compile to selectors that agree."""
    minimal = compile_selector(render(tree, False))
    full = compile_selector(render(tree, True))
    assert minimal.matches(values) is full.matches(values)
