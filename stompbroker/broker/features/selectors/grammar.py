"""
The selector language's grammar, its LALR parser, and the errors a bad selector gets.

The grammar is JMS 1.1's selector syntax (section 3.8.1.1) as lark EBNF; see
:mod:`stompbroker.broker.features.selectors` for the language.  Rules whose name starts
with ``?`` are inlined when they have one child, so the tree of ``a = 1`` is one
``compare`` node, and ``a AND b AND c`` is one flat ``conjunction``: the tree is
as deep as the nesting the user wrote, not as long as the selector.
"""

from __future__ import annotations

import functools

from lark import Lark, Token, Tree, UnexpectedInput

from stompbroker.protocol.errors import InvalidSelector

__all__ = ["check_depth", "column_of", "invalid", "parse"]

_GRAMMAR = r"""
?start: disjunction
?disjunction: conjunction (_OR conjunction)*
?conjunction: negation (_AND negation)*
?negation: predicate
    | _NOT negation -> not_
?predicate: sum
    | sum COMPARISON sum -> compare
    | sum _BETWEEN sum _AND sum -> between
    | sum _NOT _BETWEEN sum _AND sum -> not_between
    | sum _IN "(" item ("," item)* ")" -> in_
    | sum _NOT _IN "(" item ("," item)* ")" -> not_in
    | sum _LIKE STRING (_ESCAPE STRING)? -> like
    | sum _NOT _LIKE STRING (_ESCAPE STRING)? -> not_like
    | sum _IS _NULL -> is_null
    | sum _IS _NOT _NULL -> is_not_null
?sum: product (ADDITIVE product)*
?product: unary (MULTIPLICATIVE unary)*
?unary: primary
    | ADDITIVE unary -> sign
?primary: literal
    | IDENTIFIER -> header
    | QUOTED_IDENTIFIER -> quoted_header
    | "(" disjunction ")"
?item: literal
    | ADDITIVE NUMBER -> signed_number
?literal: STRING -> string
    | NUMBER -> number
    | TRUE -> true
    | FALSE -> false

// Keywords outrank IDENTIFIER, which matches them too; \b keeps "andy" a name.
_OR.2: /or\b/i
_AND.2: /and\b/i
_NOT.2: /not\b/i
_BETWEEN.2: /between\b/i
_IN.2: /in\b/i
_LIKE.2: /like\b/i
_ESCAPE.2: /escape\b/i
_IS.2: /is\b/i
_NULL.2: /null\b/i
TRUE.2: /true\b/i
FALSE.2: /false\b/i
COMPARISON: "=" | "<>" | "<=" | ">=" | "<" | ">"
ADDITIVE: "+" | "-"
MULTIPLICATIVE: "*" | "/"
STRING: /'([^']|'')*'/
NUMBER: /0[xX][0-9a-fA-F]+|(\d+\.\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?|\d+[eE][+-]?\d+[fFdD]?|\d+[lL]?/
IDENTIFIER: /[A-Za-z_$][A-Za-z0-9_$.]*/
QUOTED_IDENTIFIER: /"([^"]|"")*"/
%ignore /[ \t\r\n\f]+/
"""

#: Terminal names as a user reads them, in the order an error lists them.
_TERMINAL_NAMES = {
    "IDENTIFIER": "a header name",
    "QUOTED_IDENTIFIER": 'a "quoted" header name',
    "STRING": "a 'string'",
    "NUMBER": "a number",
    "TRUE": "TRUE",
    "FALSE": "FALSE",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "COMPARISON": "a comparison (=, <>, <, >, <=, >=)",
    "ADDITIVE": "'+', '-'",
    "MULTIPLICATIVE": "'*', '/'",
    "_NOT": "NOT",
    "_AND": "AND",
    "_OR": "OR",
    "_BETWEEN": "BETWEEN",
    "_IN": "IN",
    "_LIKE": "LIKE",
    "_ESCAPE": "ESCAPE",
    "_IS": "IS",
    "_NULL": "NULL",
    "$END": "the end of the selector",
}
_TERMINAL_ORDER = {name: index for index, name in enumerate(_TERMINAL_NAMES)}


def parse(text: str) -> Tree:
    """
    Parse a selector.

    :returns: the parse tree.
    :raises InvalidSelector: naming the column and what the parser expected there.
    """
    try:
        return _parser().parse(text)
    except UnexpectedInput as failure:
        raise _syntax_error(text, failure) from None


@functools.cache
def _parser() -> Lark:
    """Build the LALR parser on first use: brokers whose clients send no selector never pay."""
    return Lark(_GRAMMAR, parser="lalr", propagate_positions=True)


def _syntax_error(text: str, failure: UnexpectedInput) -> InvalidSelector:
    """
    Say where a selector stopped making sense and what would have been accepted.

    :param failure: lark's error; its interactive parser knows exactly which
        terminals the parser would have taken (the raw ``expected`` set of an LALR
        state can list more, from states the table merged).
    """
    token = getattr(failure, "token", None)
    if token is not None and token.type == "$END":
        column, found = len(text) + 1, "the end of the selector"
    elif token is not None:
        column, found = failure.column, repr(str(token))
    else:
        column, found = failure.column, repr(text[failure.pos_in_stream or 0])
    interactive = getattr(failure, "interactive_parser", None)
    terminals = interactive.accepts() if interactive is not None else set()
    expected = tuple(
        _TERMINAL_NAMES.get(name, name)
        for name in sorted(terminals, key=lambda name: _TERMINAL_ORDER.get(name, 99))
    )
    if len(expected) > 1:
        wanted = ", ".join(expected[:-1]) + " or " + expected[-1]
    else:
        wanted = expected[0] if expected else "nothing more"
    return invalid(text, column, f"expected {wanted}, found {found}", expected)


def invalid(text: str, column: int, what: str, expected: tuple[str, ...] = ()) -> InvalidSelector:
    """
    :param text: the selector.
    :param column: the 1-based column of the fault.
    :param what: what is wrong there.
    :returns: an :class:`InvalidSelector` whose body shows the selector and a caret.
    """
    line = text.replace("\n", " ").replace("\r", " ")
    caret = " " * (column - 1) + "^"
    detail = f"Invalid selector at column {column}: {what}\n  {line}\n  {caret}"
    return InvalidSelector(f"invalid selector at column {column}: {what}", detail, column, expected)


def check_depth(text: str, tree: Tree, max_depth: int) -> None:
    """
    Refuse trees deeper than ``max_depth`` before the recursive compiler meets them.

    :raises InvalidSelector: naming the column where the limit is passed.
    """
    pending: list[tuple[Tree, int]] = [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > max_depth:
            raise invalid(text, column_of(node), f"nested deeper than {max_depth} levels")
        for child in node.children:
            if isinstance(child, Tree):
                pending.append((child, depth + 1))


def column_of(node: Tree | Token) -> int:
    """:returns: the 1-based column where a node or token starts."""
    if isinstance(node, Token):
        return node.column or 1
    return getattr(node.meta, "column", 1)
