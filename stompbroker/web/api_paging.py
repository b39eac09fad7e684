"""
Sorting, filtering and paging of the management API's lists, server-side, with
the query parameters of RabbitMQ's management API, so that a console stays
fast with 10 000 destinations or connections: the page sends one page of rows,
never the whole list.

``?page=N`` (from 1) asks for a page; without it a list is answered whole, as
before, and the other parameters still filter and sort it.  ``page_size`` (1 to
:data:`MAX_PAGE_SIZE`, :data:`DEFAULT_PAGE_SIZE` by default), ``name`` (the
rows whose name holds it, ignoring case; a regular expression with
``use_regex=true``), ``sort`` (a field of the rows; nested fields are not
sortable) and ``sort_reverse=true``.  A paged answer is an object:
``items``, ``page``, ``page_size``, ``page_count``, ``item_count`` (rows on
this page), ``filtered_count`` (rows the filter kept) and ``total_count``
(rows before the filter).  A page past the last is a 400, as RabbitMQ answers.

Pure logic over lists of JSON rows; :mod:`stompbroker.web.api` reads the query.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from attrs import frozen

from stompbroker.web.api_guard import ApiError

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "ListQuery", "list_answer"]

#: Rows per page when ``page_size`` is not given.
DEFAULT_PAGE_SIZE = 100
#: The largest ``page_size``, RabbitMQ's too.
MAX_PAGE_SIZE = 500
_TRUE = ("true", "1", "yes")


@frozen
class ListQuery:
    """
    What a list call asks for (see the module notes).

    :ivar page: the page wanted, from 1; ``None`` answers the whole list.
    :ivar page_size: rows per page.
    :ivar name: what the names must hold (or match, with ``use_regex``).
    :ivar use_regex: whether ``name`` is a regular expression.
    :ivar sort: the field to sort on; ``None`` keeps the broker's order.
    :ivar reverse: whether to sort largest first.
    """

    page: int | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    name: str | None = None
    use_regex: bool = False
    sort: str | None = None
    reverse: bool = False

    @classmethod
    def parse(cls, get: Callable[[str], str | None]) -> ListQuery:
        """
        :param get: a query parameter's value by name, ``None`` when absent.
        :raises ApiError: 400 for a page or page size that is not a whole number in range.
        """
        page = _whole(get("page"), "page", 1, None)
        size = _whole(get("page_size"), "page_size", 1, MAX_PAGE_SIZE)
        name = get("name") or None
        use_regex = (get("use_regex") or "").lower() in _TRUE
        if name is not None and use_regex:
            try:
                re.compile(name)
            except re.error as error:
                detail = f"name is not a regular expression: {error}"
                raise ApiError(400, "bad request", detail) from None
        return cls(
            page=page,
            page_size=DEFAULT_PAGE_SIZE if size is None else size,
            name=name,
            use_regex=use_regex,
            sort=get("sort") or None,
            reverse=(get("sort_reverse") or "").lower() in _TRUE,
        )


def _whole(text: str | None, what: str, least: int, most: int | None) -> int | None:
    if text is None or text == "":
        return None
    if not text.isdigit() or int(text) < least or (most is not None and int(text) > most):
        bound = f"from {least} to {most}" if most is not None else f"{least} or more"
        raise ApiError(400, "bad request", f"{what} must be a whole number {bound}, not {text!r}")
    return int(text)


def _sort_key(value: Callable[[Any], Any]) -> Callable[[Any], tuple[int, Any]]:
    """Rows without the field (or with ``null``) sort first; numbers before text."""

    def key(row: Any) -> tuple[int, Any]:
        found = value(row)
        if found is None:
            return (0, 0)
        if isinstance(found, (int, float)):
            return (1, found)
        if isinstance(found, (list, tuple, dict)):
            return (1, len(found))
        return (2, str(found).lower())

    return key


def _field_of_document(row: Any, field: str) -> Any:
    return row.get(field)


def list_answer(
    rows: Sequence[Any],
    wanted: ListQuery,
    name_field: str,
    fields: Iterable[str] | None = None,
    value: Callable[[Any, str], Any] = _field_of_document,
    document: Callable[[Any], Any] | None = None,
) -> Any:
    """
    Filter, sort and page ``rows``, making JSON of the rows answered only: with
    10 000 of them, a page of 100 costs 100 documents, not 10 000.

    :param rows: every row of the list, in the broker's order: JSON objects, or
        records with ``value`` and ``document``.
    :param wanted: the call's :class:`ListQuery`.
    :param name_field: the field ``name`` filters on (``destination``, ``id``).
    :param fields: the fields ``sort`` may name; by default the first row's keys.
    :param value: a row's value of a field.
    :param document: a row as JSON; by default the row itself.
    :returns: the rows (a list) without ``page``, or a paged answer object with it.
    :raises ApiError: 400 for an unknown sort field or a page past the last.
    """
    kept = list(rows)
    if wanted.name is not None:
        if wanted.use_regex:
            pattern = re.compile(wanted.name)
            kept = [row for row in kept if pattern.search(str(value(row, name_field) or ""))]
        else:
            needle = wanted.name.lower()
            kept = [row for row in kept if needle in str(value(row, name_field) or "").lower()]
    if wanted.sort is not None:
        known = set(fields) if fields is not None else set(rows[0]) if rows else set()
        if rows and wanted.sort not in known:
            raise ApiError(
                400,
                "bad request",
                f"no field {wanted.sort!r} to sort on; the rows have {', '.join(sorted(known))}",
            )
        field = wanted.sort
        kept.sort(key=_sort_key(lambda row: value(row, field)), reverse=wanted.reverse)
    shown = kept
    answer: dict[str, Any] | None = None
    if wanted.page is not None:
        size = wanted.page_size
        page_count = max(1, -(-len(kept) // size))
        if wanted.page > page_count:
            raise ApiError(400, "bad request", f"page {wanted.page} is past the last, {page_count}")
        shown = kept[(wanted.page - 1) * size : wanted.page * size]
        answer = {
            "page": wanted.page,
            "page_size": size,
            "page_count": page_count,
            "item_count": len(shown),
            "filtered_count": len(kept),
            "total_count": len(rows),
        }
    items = shown if document is None else [document(row) for row in shown]
    if answer is None:
        return items
    return {"items": items, **answer}
